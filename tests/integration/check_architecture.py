#!/usr/bin/python3
"""The architecture rule of DESIGN.md, checked on the library's sources.

usage: check_architecture.py LIB_DIR   (the repository's lib/)

Layers, bottom to top: core, nn, models, train, tasks, experiment. A file of lib/include/seqlab/<L>/
or lib/src/<L>/ may include seqlab headers of its own layer and the layers below only, and the
layers of the seqlab::nn target (core .. tasks) may include neither Boost nor nlohmann-json: that
target depends on xtensor and BLAS only, and on Debian the compiler would find those headers in
/usr/include whatever the CMake targets say. Only direct includes are read; since every seqlab
header is checked too, what a file reaches through seqlab headers is covered, and
tests/integration/install/ checks the installed nn headers with the preprocessor.

Before checking LIB_DIR the script checks itself on a small tree with known violations, so a
checker that finds nothing cannot pass. Exit status 0 = no violation.
"""
import os
import re
import sys
import tempfile

LAYERS = ["core", "nn", "models", "train", "tasks", "experiment"]
NN_LAYERS = LAYERS[:LAYERS.index("experiment")]
FORBIDDEN_IN_NN = ("boost/", "nlohmann/")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def violations(lib):
    """(path, message) for every include that breaks the rule under lib/."""
    found = []
    roots = [os.path.join(lib, "include", "seqlab"), os.path.join(lib, "src")]
    for root in roots:
        if not os.path.isdir(root):
            found.append((root, "missing folder"))
            continue
        for layer in sorted(os.listdir(root)):
            folder = os.path.join(root, layer)
            if not os.path.isdir(folder):
                continue
            if layer not in LAYERS:
                found.append((folder, f"folder '{layer}' is not a layer ({', '.join(LAYERS)})"))
                continue
            rank = LAYERS.index(layer)
            for dirpath, _, files in os.walk(folder):
                for name in sorted(files):
                    if not name.endswith((".hpp", ".cpp", ".h", ".cc")):
                        continue
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as f:
                        text = strip_comments(f.read())
                    for _, header in INCLUDE.findall(text):
                        parts = header.split("/")
                        if parts[0] == "seqlab" and len(parts) > 2:
                            used = parts[1]
                            if used not in LAYERS:
                                found.append((path, f"includes {header}: '{used}' is not a layer"))
                            elif LAYERS.index(used) > rank:
                                found.append((path, f"includes {header}: layer '{layer}' may use only "
                                                    f"{', '.join(LAYERS[:rank + 1])}"))
                        if layer in NN_LAYERS and header.startswith(FORBIDDEN_IN_NN):
                            found.append((path, f"includes <{header}>: seqlab::nn ({', '.join(NN_LAYERS)}) "
                                                "depends on xtensor and BLAS only"))
    return found


def self_test():
    """The checker finds each kind of violation in a made-up tree, and nothing in a clean one."""
    with tempfile.TemporaryDirectory(prefix="seqlab_arch_") as tmp:
        def put(rel, text):
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        put("include/seqlab/core/ok.hpp", '#include <xtensor/xtensor.hpp>\n// #include <boost/x.hpp>\n')
        put("src/experiment/ok.cpp", '#include <nlohmann/json.hpp>\n#include "seqlab/nn/x.hpp"\n')
        if violations(tmp):
            return ["self-test: a clean tree was reported: " + repr(violations(tmp))]
        put("include/seqlab/train/a.hpp", '#include "seqlab/experiment/options.hpp"\n')
        put("src/nn/b.cpp", "#include <nlohmann/json.hpp>\n")
        put("src/models/c.cpp", "  #  include <boost/program_options.hpp>\n")
        put("src/stray/d.cpp", "\n")
        got = violations(tmp)
        want = ["a.hpp", "b.cpp", "c.cpp", "stray"]
        missed = [w for w in want if not any(w in p for p, _ in got)]
        return [f"self-test: violation in {m} not found" for m in missed]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_architecture.py LIB_DIR")
    problems = self_test()
    for p in problems:
        print("FAILED:", p)
    found = violations(sys.argv[1])
    for path, msg in found:
        print(f"{os.path.relpath(path, os.path.dirname(sys.argv[1]))}: {msg}")
    if problems or found:
        return 1
    print("architecture: ok (no folder includes a layer above it; seqlab::nn includes neither Boost "
          "nor nlohmann-json)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
