#!/usr/bin/env python3
"""The layers of docs/design.md ("Layers and their never-rules"), checked.

The build rejects most crossings itself (cmake/Layers.cmake: a target
reaches only the headers of what it links); this check keeps what include
roots cannot express and the links themselves. It reads every #include of
product code (src/, nf/ but their tests) and every target_link_libraries of
the CMake files, and fails, naming the file and the line, when one crosses a
forbidden line:

  core      LLVM and the C++ standard library only (and support/Error.h,
            Bytes.h); never libbpf, clang, kernel or system headers; its
            passes/ is its own: other layers include the core's API (src/core/*.h)
            and never link morpheus_core_internals (tests and tools may)
  support   nothing of Morpheus but support/
  backend/bpf   core + support (+ libbpf); morpheus_bpf_ir's files never libbpf
  backend/user  core + support; never the bpf backend, never libbpf
  runtime   core + both backends + support (the loop drives both); libbpf only
            through backend/bpf; the only layer that includes or links
            cpp-httplib (runtime/MetricsServer serves HTTP for the others)
  client    backend/bpf + support; its headers show none of the backend
  bench     runtime + backend + core + support + the nf registry
  cli       everything product but libbpf (reached through backend/bpf)
  nf control planes   client + support + nf/common; no user-space libbpf
  nf data planes      nothing of Morpheus (their own headers, nf/common/*.bpf.h;
                      nf/<name>/user/ handlers also <morpheus_user.h>)
  product code never includes tools/ or tests/ (nor links their targets)
  every folder of src/ is a layer named here; src/ includes by layer path
  ("core/X.h", never "../core/X.h"), and our own headers with quotes
  links are written as target names (no variables the check cannot expand,
  no generator expressions)

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
    'backend-bpf': {'core', 'support'},
    'backend-user': {'core', 'support'},
    'runtime': {'core', 'backend-bpf', 'backend-user', 'support'},
    'client': {'backend-bpf', 'support'},
    'client-header': {'support'},
    'bench': {'runtime', 'backend-bpf', 'core', 'support', 'nf-control', 'nf-dataplane'},
    'cli': {'core', 'backend-bpf', 'backend-user', 'runtime', 'client', 'bench', 'support',
            'nf-control'},
    'nf-control': {'client', 'support', 'nf-dataplane'},
    'nf-dataplane': set(),
}
# Layers that must not include libbpf's user-space API (<bpf/bpf.h>, <bpf/libbpf.h>).
# Above the backend, maps, programs and their types are reached through
# backend/bpf (MapAccess, MapUpdater, TestRun, KernelTypes, BpfObject, ...),
# whose functions name the map or program in their errors and own what they
# open.
NO_LIBBPF = {'core', 'support', 'client-header', 'nf-control', 'backend-user',
             'runtime', 'client', 'bench', 'cli'}
LIBBPF_HEADERS = ('bpf/bpf.h', 'bpf/libbpf.h', 'bpf/btf.h')
# cpp-httplib (<httplib.h>, PkgConfig::CPP_HTTPLIB): HTTP is served by
# runtime/MetricsServer alone; the layers above publish through it.
HTTPLIB_HEADER = 'httplib.h'
HTTPLIB_TARGET = 'PkgConfig::CPP_HTTPLIB'
HTTPLIB_LAYERS = {'runtime'}
# Libraries whose files never use libbpf although their layer may: the
# backend's IR half, linked by tools that load nothing.
LIBBPF_FREE_LIBRARIES = {'morpheus_bpf_ir'}
# The folders of src/ and their layers: a folder not named here is refused.
SRC_LAYERS = {'core': 'core', 'support': 'support', 'runtime': 'runtime', 'client': 'client',
              'bench': 'bench', 'cli': 'cli'}
BACKENDS = {'bpf': 'backend-bpf', 'user': 'backend-user'}
# The headers the core may include with angle brackets: LLVM's, and the C and
# C++ standard libraries' (names without a '/', C's ending in .h).
C_STANDARD = {'assert.h', 'ctype.h', 'errno.h', 'float.h', 'inttypes.h', 'limits.h',
              'math.h', 'stdarg.h', 'stdbool.h', 'stddef.h', 'stdint.h', 'stdio.h',
              'stdlib.h', 'string.h'}
# Headers our data planes include with angle brackets by design: the
# user-space backend's C API for handlers.
OUR_ANGLED = {'morpheus_user.h', 'morpheus_spec.h', 'morpheus_client.h'}
# Support headers the core may use: the error convention and bytes.
CORE_SUPPORT = {'src/support/Error.h', 'src/support/Bytes.h'}
# The core's inside: its passes and what they share. The build hides it from
# other layers (src/core/CMakeLists.txt publishes core/*.h alone); this check
# names the include, and a product link to the target that shows it.
CORE_INSIDE = 'src/core/passes/'
CORE_INTERNALS_TARGET = 'morpheus_core_internals'
# Known, argued exceptions: (file, include) -> why.
EXCEPTIONS = {
    ('nf/l2switch/L2Switch.cpp', '<bpf/bpf.h>'):
        'creates the flood groups (DEVMAP_HASH inner maps) itself; the client '
        'library does not create maps',
}
# Where a quoted include is searched, in order (the build's include dirs).
SEARCH = ['src', '.', 'tools', 'tests/support', 'nf/common/testing', 'examples']


def layer_of(path):
    """The layer of a repository-relative path, None for what no rule covers."""
    parts = path.split('/')
    if parts[0] == 'src' and len(parts) > 2:
        if parts[1] == 'backend':
            return BACKENDS.get(parts[2]) if len(parts) > 3 else 'unknown'
        layer = SRC_LAYERS.get(parts[1], 'unknown')
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


def resolve(including, name, with_own_directory=True):
    """The repository-relative file an include names, or None."""
    here = os.path.dirname(including)
    for base in ([here] if with_own_directory else []) + SEARCH:
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


def library_files(name):
    """The sources of a product library and the headers beside them of the
    same names, read from its add_library()."""
    for path in cmake_files():
        with open(os.path.join(ROOT, path)) as f:
            text = strip_comments(f.read())
        m = re.search(r'add_library\(\s*' + re.escape(name) + r'\s+STATIC([^)]*)\)', text)
        if not m:
            continue
        directory = os.path.dirname(path)
        found = set()
        for source in m.group(1).split():
            stem = os.path.join(directory, os.path.splitext(source)[0])
            found.update(stem + ext for ext in ('.cpp', '.h') if os.path.isfile(os.path.join(ROOT, stem + ext)))
        return found
    return set()


def angled_problem(layer, path, name):
    """Why an include in angle brackets crosses a line, or None."""
    if layer == 'core':
        if name.startswith(('llvm/', 'llvm-c/')):
            return None
        if '/' not in name and (not name.endswith('.h') or name in C_STANDARD):
            return None
        return 'the core includes LLVM and the standard library only'
    if name == HTTPLIB_HEADER and layer not in HTTPLIB_LAYERS:
        return f'{layer} never includes cpp-httplib (HTTP is runtime/MetricsServer\'s)'
    if name in LIBBPF_HEADERS and (layer in NO_LIBBPF or path in LIBBPF_FREE):
        return f'{layer if path not in LIBBPF_FREE else path} never uses libbpf\'s user-space API'
    return None


def check_includes(files):
    problems = []
    for path in files:
        layer = layer_of(path)
        if layer is None or layer in ('tools', 'tests', 'test'):
            continue
        if layer == 'unknown':
            problems.append(f'{path}: src/{path.split("/")[1]}/ is in no layer (add it to the '
                            'layers of docs/design.md, cmake/Layers.cmake and this check)')
            continue
        for number, angled, name in includes(path):
            where = f'{path}:{number}: #include {"<" if angled else chr(34)}{name}{">" if angled else chr(34)}'
            spelled = f'<{name}>' if angled else f'"{name}"'
            if (path, spelled) in EXCEPTIONS:
                continue
            if angled:
                why = angled_problem(layer, path, name)
                if why:
                    problems.append(f'{where}: {why}')
                    continue
                if name in OUR_ANGLED or resolve(path, name, with_own_directory=False) is None:
                    continue
                problems.append(f'{where}: our own headers are included with quotes')
            if path.startswith('src/') and '..' in name.split('/'):
                problems.append(f'{where}: src/ includes by layer path, never relative')
                continue
            target = resolve(path, name, with_own_directory=not angled)
            if target is None:
                continue  # generated or system header spelled with quotes
            target_layer = layer_of(target)
            if target_layer in ('tools', 'tests', 'test'):
                problems.append(f'{where}: product code never includes {target_layer}/ ({target})')
                continue
            if target.startswith(CORE_INSIDE) and layer != 'core':
                problems.append(f'{where}: {CORE_INSIDE} is the core\'s inside: {layer} includes '
                                f'the core\'s API (src/core/*.h), never {target}')
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


def expand(name, defined):
    """The targets a name of a CMake file may stand for: itself, or, when it
    holds a variable (`morpheus_nf_${name}`), every defined target it
    matches. Generator expressions stand for nothing the check can read."""
    if '$<' in name or re.fullmatch(r'(\$\{[^}]*\})+', name):
        return None
    if '${' not in name:
        return [name]
    pattern = re.compile('^' + '.+'.join(re.escape(part) for part in
                                         re.split(r'\$\{[^}]*\}', name)) + '$')
    matches = [target for target in defined if '${' not in target and pattern.match(target)]
    return matches or None


LINK_KEYWORDS = ('PUBLIC', 'PRIVATE', 'INTERFACE')


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
            deps = [d for d in m.group(2).split() if d not in LINK_KEYWORDS]
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
        if layer == 'unknown':
            problems.append(f'{path}: {target} is in a folder of src/ that is in no layer')
            continue
        for written in deps:
            names = expand(written, defined)
            if names is None:
                problems.append(f'{path}: {target} links {written}: write links as target '
                                'names, so the layer check can read them')
                continue
            for dep in names:
                problems += link_problems(path, target, layer, dep, defined, target_layer)
    return problems


def link_problems(path, target, layer, dep, defined, target_layer):
    if dep == CORE_INTERNALS_TARGET:
        return [f'{path}: {target} ({layer}) links {dep}: only tests and tools see the core\'s '
                f'inside ({CORE_INSIDE})']
    if layer == 'core' and dep not in ('LLVM', 'morpheus_support'):
        return [f'{path}: {target} links {dep}: the core links LLVM (and support\'s headers) only']
    if dep == 'PkgConfig::LIBBPF' and (layer in NO_LIBBPF | {'nf-control'}
                                       or target in LIBBPF_FREE_LIBRARIES):
        return [f'{path}: {target} ({layer}) links libbpf']
    if dep == HTTPLIB_TARGET and layer not in HTTPLIB_LAYERS:
        return [f'{path}: {target} ({layer}) links cpp-httplib (HTTP is runtime/MetricsServer\'s)']
    dep_layer = target_layer.get(dep)
    if dep_layer == 'client-header':
        dep_layer = 'client'
    if dep_layer in ('tools', 'tests', 'test'):
        return [f'{path}: {target} ({layer}) links {dep}, defined in {defined[dep]}: '
                f'product code never links {dep_layer}/']
    if dep_layer and dep_layer != layer and dep_layer not in ALLOWED[layer]:
        return [f'{path}: {target} ({layer}) links {dep} ({dep_layer})']
    return []


files = sorted(sources())
LIBBPF_FREE = set().union(*(library_files(name) for name in LIBBPF_FREE_LIBRARIES))
DATAPLANE_HEADERS = dataplane_headers(files)
problems = check_includes(files) + check_links()
for problem in problems:
    print(problem)
if problems:
    print(f'check_layers: {len(problems)} line(s) crossed; the layers are in docs/design.md')
    sys.exit(1)
print(f'check_layers: {len(files)} files, every include and link within its layer')
