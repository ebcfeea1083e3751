#!/usr/bin/env python3
"""The layers of docs/design.md ("Layers and their never-rules"), checked.

Reads every #include of product code (src/, nf/ but their tests) and every
target_link_libraries of the CMake files, and fails, naming the file and the
line, when one crosses a forbidden line:

  core      LLVM only (and support/Error.h, Bytes.h); never libbpf
  support   nothing of Morpheus but support/
  backend   core + support (+ libbpf: the only layer that calls it)
  runtime   core + backend + support
  client    backend + support; its headers show none of the backend
  bench     runtime + backend + core + support + the nf registry
  cli       everything product but libbpf (reached through backend/bpf)
  nf control planes   client + support + nf/common; no user-space libbpf
  nf data planes      nothing of Morpheus (their own headers, nf/common/*.bpf.h;
                      nf/<name>/user/ handlers also <morpheus_user.h>)
  product code never includes tools/ or tests/ (nor links their targets)

Usage: check_layers.py [REPO_ROOT]; exit 0 when every line holds, 1 otherwise.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), '..', '..'))

# Which product layers each layer may include (its own always).
ALLOWED = {
    'core': {'support'},
    'support': set(),
    'backend': {'core', 'support'},
    'runtime': {'core', 'backend', 'support'},
    'client': {'backend', 'support'},
    'client-header': {'support'},
    'bench': {'runtime', 'backend', 'core', 'support', 'nf-control', 'nf-dataplane'},
    'cli': {'core', 'backend', 'runtime', 'client', 'bench', 'support', 'nf-control'},
    'nf-control': {'client', 'support', 'nf-dataplane'},
    'nf-dataplane': set(),
}
# Layers that must not include libbpf's user-space API: above the backend,
# maps, programs and their types are reached through backend/bpf (MapAccess,
# MapUpdater, TestRun, KernelTypes, BpfObject, ...), whose functions name
# the map or program in their errors and own what they open.
NO_LIBBPF = {'core', 'support', 'client-header', 'nf-control',
             'runtime', 'client', 'bench', 'cli'}
LIBBPF_HEADERS = ('bpf/bpf.h', 'bpf/libbpf.h', 'bpf/btf.h')
# Support headers the core may use: the error convention and bytes.
CORE_SUPPORT = {'src/support/Error.h', 'src/support/Bytes.h'}
# Known, argued exceptions: (file, include) -> why.
EXCEPTIONS = {
    ('nf/l2switch/L2Switch.cpp', '<bpf/bpf.h>'):
        'creates the flood groups (DEVMAP_HASH inner maps) itself; the client '
        'library does not create maps',
    ('src/runtime/Optimizer.cpp', '<bpf/bpf.h>'):
        'its pins, program-array and fallback writes move behind backend/bpf '
        'once the typed-errors branch, which rewrites Optimizer.cpp, has landed',
}
# Where a quoted include is searched, in order (the build's include dirs).
SEARCH = ['src', '.', 'tools', 'tests/support', 'nf/common/testing', 'examples']


def layer_of(path):
    """The layer of a repository-relative path, None for what no rule covers."""
    parts = path.split('/')
    if parts[0] == 'src' and len(parts) > 2:
        layer = {'core': 'core', 'support': 'support', 'backend': 'backend',
                 'runtime': 'runtime', 'client': 'client', 'bench': 'bench',
                 'cli': 'cli'}.get(parts[1])
        if layer == 'client' and path.endswith('.h'):
            return 'client-header'
        return layer
    if parts[0] == 'nf' and len(parts) > 2:
        if 'tests' in parts or 'testing' in parts:
            return 'test'
        # nf/<name>/user/: the function's user-space handler (backend/user),
        # a data plane too: C against morpheus_user.h, nothing else of Morpheus.
        if (path.endswith(('.bpf.c', '.bpf.h')) or path in DATAPLANE_HEADERS
                or parts[2] == 'user'):
            return 'nf-dataplane'
        return 'nf-control'
    if parts[0] in ('tools', 'tests'):
        return parts[0]
    return None


def resolve(including, name):
    """The repository-relative file a quoted include names, or None."""
    here = os.path.dirname(including)
    for base in [here] + SEARCH:
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(ROOT, candidate)):
            return candidate
    return None


INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def includes(path):
    with open(os.path.join(ROOT, path), errors='replace') as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1) == '<', m.group(2)


def sources():
    for top in ('src', 'nf', 'tools', 'tests'):
        for directory, _, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if name.endswith(('.c', '.h', '.cpp', '.hpp')):
                    yield os.path.relpath(os.path.join(directory, name), ROOT)


def dataplane_headers(files):
    """Headers the data planes include, transitively: they are data plane too."""
    found, todo = set(), [f for f in files if f.startswith('nf/') and f.endswith('.bpf.c')]
    while todo:
        path = todo.pop()
        for _, angled, name in includes(path):
            target = None if angled else resolve(path, name)
            if target and target.startswith('nf/') and target not in found:
                found.add(target)
                todo.append(target)
    return found


def check_includes(files):
    problems = []
    for path in files:
        layer = layer_of(path)
        if layer is None or layer in ('tools', 'tests', 'test'):
            continue
        for number, angled, name in includes(path):
            where = f'{path}:{number}: #include {"<" if angled else chr(34)}{name}{">" if angled else chr(34)}'
            spelled = f'<{name}>' if angled else f'"{name}"'
            if (path, spelled) in EXCEPTIONS:
                continue
            if angled:
                if layer == 'core' and (name.startswith('bpf/') or name.startswith('linux/')):
                    problems.append(f'{where}: the core is LLVM only')
                elif layer in NO_LIBBPF and name in LIBBPF_HEADERS:
                    problems.append(f'{where}: {layer} never uses libbpf\'s user-space API')
                continue
            target = resolve(path, name)
            if target is None:
                continue  # generated or system header spelled with quotes
            target_layer = layer_of(target)
            if target_layer in ('tools', 'tests', 'test'):
                problems.append(f'{where}: product code never includes {target_layer}/ ({target})')
                continue
            if target_layer is None or target_layer == layer:
                continue
            if layer == 'client' and target_layer == 'client-header':
                continue
            if layer == 'core' and target_layer == 'support' and target not in CORE_SUPPORT:
                problems.append(f'{where}: the core uses only support/Error.h and Bytes.h')
                continue
            if target_layer == 'client-header':
                target_layer = 'client'
            if target_layer not in ALLOWED[layer]:
                problems.append(f'{where}: {layer} never includes {target_layer} ({target})')
    return problems


def cmake_files():
    for directory, _, files in os.walk(ROOT):
        if '/build' in directory[len(ROOT):] or '/.git' in directory[len(ROOT):]:
            continue
        if 'CMakeLists.txt' in files:
            yield os.path.relpath(os.path.join(directory, 'CMakeLists.txt'), ROOT)


def strip_comments(text):
    return re.sub(r'#[^\n]*', '', text)


def check_links():
    """Targets defined under tools/ or tests/ are never linked by product
    libraries; each product library links only the layers below it."""
    defined, links = {}, []
    for path in cmake_files():
        with open(os.path.join(ROOT, path)) as f:
            text = strip_comments(f.read())
        directory = os.path.dirname(path)
        for m in re.finditer(r'add_(?:library|executable)\(\s*([\w${}-]+)', text):
            defined[m.group(1)] = directory
        for m in re.finditer(r'target_link_libraries\(\s*([\w${}-]+)([^)]*)\)', text):
            deps = [d for d in m.group(2).split() if d not in ('PUBLIC', 'PRIVATE', 'INTERFACE')]
            links.append((path, m.group(1), deps))
    target_layer = {}
    for target, directory in defined.items():
        if directory.startswith('nf'):
            target_layer[target] = 'test' if 'test' in target else 'nf-control'
        else:
            target_layer[target] = layer_of(directory + '/x.cpp') or layer_of(directory + '/x/x.cpp')
    problems = []
    for path, target, deps in links:
        layer = target_layer.get(target)
        if layer in (None, 'tools', 'tests', 'test'):
            continue
        if layer == 'client-header':
            layer = 'client'
        for dep in deps:
            if layer == 'core' and dep != 'LLVM':
                problems.append(f'{path}: {target} links {dep}: the core links LLVM only')
                continue
            if dep == 'PkgConfig::LIBBPF' and layer in ('core', 'support', 'nf-control'):
                problems.append(f'{path}: {target} ({layer}) links libbpf')
                continue
            dep_layer = target_layer.get(dep)
            if dep_layer == 'client-header':
                dep_layer = 'client'
            if dep_layer in ('tools', 'tests', 'test'):
                problems.append(f'{path}: {target} ({layer}) links {dep}, '
                                f'defined in {defined[dep]}: product code never links {dep_layer}/')
            elif dep_layer and dep_layer != layer and dep_layer not in ALLOWED[layer]:
                problems.append(f'{path}: {target} ({layer}) links {dep} ({dep_layer})')
    return problems


files = sorted(sources())
DATAPLANE_HEADERS = dataplane_headers(files)
problems = check_includes(files) + check_links()
for problem in problems:
    print(problem)
if problems:
    print(f'check_layers: {len(problems)} line(s) crossed; the layers are in docs/design.md')
    sys.exit(1)
print(f'check_layers: {len(files)} files, every include and link within its layer')
