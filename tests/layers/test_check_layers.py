#!/usr/bin/env python3
"""check_layers.py, tested: each kind of crossing it exists to catch is
planted, one line at a time, in a copy of the repository, and the check must
fail naming the file; the copy as it is must pass. A kind the check stops
seeing makes this test fail.

Usage: test_check_layers.py REPO_ROOT (python3 -m unittest style output).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), '..', '..'))
CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'check_layers.py')

# (what is planted, file, line, what the check must say). An include is
# appended to the file; a CMake line to its CMakeLists.txt.
PLANTS = [
    ('angled include of our own header', 'src/runtime/Optimizer.cpp',
     '#include <core/Tables.h>', 'our own headers are included with quotes'),
    ('clang header in the core', 'src/core/Tables.cpp',
     '#include <clang/Basic/Version.h>', 'the core includes LLVM and the standard library only'),
    ('kernel header in the core', 'src/core/Tables.cpp',
     '#include <linux/bpf.h>', 'the core includes LLVM and the standard library only'),
    ('system header in the core', 'src/core/Tables.cpp',
     '#include <unistd.h>', 'the core includes LLVM and the standard library only'),
    ('libbpf in the core', 'src/core/Pipeline.cpp',
     '#include <bpf/libbpf.h>', 'the core includes LLVM and the standard library only'),
    ('core includes the runtime', 'src/core/Pipeline.cpp',
     '#include "runtime/Optimizer.h"', 'core never includes runtime'),
    ('runtime includes a pass\'s header', 'src/runtime/Daemon.cpp',
     '#include "core/passes/TableRewriting.h"', "src/core/passes/ is the core's inside"),
    ('user backend includes a pass\'s header', 'src/backend/user/Handler.cpp',
     '#include "core/passes/TablePasses.h"', "src/core/passes/ is the core's inside"),
    ('core includes a support header beyond Error.h and Bytes.h', 'src/core/Tables.cpp',
     '#include "support/Log.h"', 'the core uses only support/Error.h and Bytes.h'),
    ('support includes the core', 'src/support/Log.cpp',
     '#include "core/Tables.h"', 'support never includes core'),
    ('user backend includes the bpf backend', 'src/backend/user/Table.cpp',
     '#include "backend/bpf/MapTypes.h"', 'backend-user never includes backend-bpf'),
    ('bpf backend includes the user backend', 'src/backend/bpf/Guard.cpp',
     '#include "backend/user/Table.h"', 'backend-bpf never includes backend-user'),
    ('libbpf in the user backend', 'src/backend/user/Table.cpp',
     '#include <bpf/bpf.h>', "never uses libbpf's user-space API"),
    ('libbpf in the libbpf-free library', 'src/backend/bpf/MapTypes.cpp',
     '#include <bpf/libbpf.h>', "src/backend/bpf/MapTypes.cpp never uses libbpf"),
    ('libbpf in the runtime', 'src/runtime/Daemon.cpp',
     '#include <bpf/bpf.h>', "runtime never uses libbpf's user-space API"),
    ('libbpf BTF in the cli', 'src/cli/MapCommand.cpp',
     '#include <bpf/btf.h>', "cli never uses libbpf's user-space API"),
    ('cpp-httplib in the cli', 'src/cli/RunCommand.cpp',
     '#include <httplib.h>', 'cli never includes cpp-httplib'),
    ('cpp-httplib in a control plane', 'nf/router/Control.cpp',
     '#include <httplib.h>', 'nf-control never includes cpp-httplib'),
    ('relative include in src/', 'src/runtime/Daemon.cpp',
     '#include "../core/Tables.h"', 'src/ includes by layer path, never relative'),
    ('runtime includes the cli', 'src/runtime/Daemon.cpp',
     '#include "cli/Reports.h"', 'runtime never includes cli'),
    ('product code includes tools/', 'src/runtime/Daemon.cpp',
     '#include "netns/VethPair.h"', 'product code never includes tools/'),
    ('product code includes tests/', 'src/cli/Commands.cpp',
     '#include "KernelSupport.h"', 'product code never includes tests/'),
    ("client header shows the backend", 'src/client/Map.h',
     '#include "backend/bpf/MapIO.h"', 'client-header never includes backend-bpf'),
    ('control plane uses libbpf', 'nf/router/Control.cpp',
     '#include <bpf/bpf.h>', "nf-control never uses libbpf"),
    ('control plane includes the runtime', 'nf/router/Control.cpp',
     '#include "runtime/Optimizer.h"', 'nf-control never includes runtime'),
    ('data plane includes Morpheus', 'nf/router/router.bpf.c',
     '#include "core/Tables.h"', 'nf-dataplane never includes core'),
    ('a new folder of src/', 'src/agent/Agent.cpp',
     '#include "core/Tables.h"', 'src/agent/ is in no layer'),
    ('core links a support library', 'src/core/CMakeLists.txt',
     'target_link_libraries(morpheus_core PUBLIC morpheus_log)', 'the core links LLVM'),
    ('link written as a variable', 'src/client/CMakeLists.txt',
     'target_link_libraries(morpheus_client PUBLIC ${RUNTIME_LIBRARY})', 'write links as target names'),
    ('link written as a generator expression', 'src/client/CMakeLists.txt',
     'target_link_libraries(morpheus_client PUBLIC $<TARGET_NAME:morpheus_runtime>)',
     'write links as target names'),
    ('client links the runtime', 'src/client/CMakeLists.txt',
     'target_link_libraries(morpheus_client PUBLIC morpheus_runtime)',
     'morpheus_client (client) links morpheus_runtime (runtime)'),
    ('user backend links the bpf backend', 'src/backend/user/CMakeLists.txt',
     'target_link_libraries(morpheus_user PRIVATE morpheus_bpf)',
     'morpheus_user (backend-user) links morpheus_bpf (backend-bpf)'),
    ('the libbpf-free library links libbpf', 'src/backend/bpf/CMakeLists.txt',
     'target_link_libraries(morpheus_bpf_ir PUBLIC PkgConfig::LIBBPF)', 'links libbpf'),
    ('the client links cpp-httplib', 'src/client/CMakeLists.txt',
     'target_link_libraries(morpheus_client PRIVATE PkgConfig::CPP_HTTPLIB)',
     'morpheus_client (client) links cpp-httplib'),
    ("product links the core's inside", 'src/cli/CMakeLists.txt',
     'target_link_libraries(morpheus_cli PRIVATE morpheus_core_internals)',
     "morpheus_cli (cli) links morpheus_core_internals: only tests and tools"),
    ('product links a test library', 'src/runtime/CMakeLists.txt',
     'target_link_libraries(morpheus_runtime PRIVATE morpheus_test_support)',
     'product code never links tests/'),
]


def run_check(root):
    return subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)


class LayerCheck(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.copy = tempfile.mkdtemp(prefix='morpheus-layers-')
        for top in ('src', 'nf', 'tools', 'tests', 'examples'):
            shutil.copytree(os.path.join(ROOT, top), os.path.join(cls.copy, top),
                            ignore=shutil.ignore_patterns('build', '__pycache__', '*.o'))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.copy, ignore_errors=True)

    def test_the_tree_as_it_is_passes(self):
        checked = run_check(self.copy)
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)

    def test_every_planted_crossing_is_named(self):
        for what, path, line, said in PLANTS:
            with self.subTest(what):
                target = os.path.join(self.copy, path)
                existed = os.path.exists(target)
                before = None
                if existed:
                    with open(target) as f:
                        before = f.read()
                os.makedirs(os.path.dirname(target), exist_ok=True)
                try:
                    with open(target, 'a') as f:
                        f.write('\n' + line + '\n')
                    checked = run_check(self.copy)
                finally:
                    if existed:
                        with open(target, 'w') as f:
                            f.write(before)
                    else:
                        os.remove(target)
                        os.rmdir(os.path.dirname(target))
                self.assertEqual(checked.returncode, 1, f'{what}: not caught\n{checked.stdout}')
                self.assertIn(path.replace('CMakeLists.txt', ''), checked.stdout)
                self.assertIn(said, checked.stdout)


if __name__ == '__main__':
    unittest.main()
