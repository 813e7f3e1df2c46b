#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""No function over 120 lines: C and C++ in src/ and tests/, Python in tests/.

    function_length.py [--max N] [--list] ROOT

Prints FILE:LINE: FUNCTION is N lines (over MAX) for each function longer
than --max (120) and exits 1 if there is one; --list prints every function
found with its length (to check the scan). A function's length counts its
lines from the first line of its declaration (template and attributes
included) to its closing brace (C, C++), or from its `def` line to its last
line (Python, ast).

The C and C++ scan matches braces after blanking comments, string and
character literals (raw strings too) and preprocessor lines: at namespace,
class and `extern "C"` scope, a `{` opens a function body when the
declaration before it has a parameter list and is neither an initializer
(a `=` outside parentheses), a class, struct, union or enum, nor a member's
brace initializer in a constructor's initializer list. Lambdas and local
classes count as part of the function around them.
"""
import argparse
import ast
import bisect
import os
import re
import sys

MAX_LINES = 120
C_SUFFIXES = (".c", ".cc", ".cpp", ".h", ".hpp")
C_DIRS = ("src", "tests")
PY_DIRS = ("tests",)


# What blank() replaces by spaces, in one pass: preprocessor lines (with
# their continuations), comments, raw strings, string and character
# literals; numbers are matched first so that a digit separator
# (0x8000'0000) is not read as a character literal.
LEXEMES = re.compile(
    r"""(?P<num>\b\d[\w']*)"""
    r"""|(?P<pp>^[ \t]*\#(?:[^\n]*\\\n)*[^\n]*)"""
    r"""|(?P<line>//[^\n]*)"""
    r"""|(?P<block>/\*.*?(?:\*/|\Z))"""
    r"""|(?P<raw>(?<![\w])R"(?P<delim>[^()\\ "]{0,16})\(.*?(?:\)(?P=delim)"|\Z))"""
    r"""|(?P<str>"(?:\\.|[^"\\\n])*"?)"""
    r"""|(?P<chr>'(?:\\.|[^'\\\n])*'?)""",
    re.S | re.M)


def blank(text):
    """`text` with comments, literals and preprocessor lines replaced by
    spaces (newlines kept, so offsets and line numbers stay)."""
    def spaces(m):
        if m.lastgroup == "num":
            return m.group(0)
        return re.sub(r"[^\n]", " ", m.group(0))
    return LEXEMES.sub(spaces, text)


def top_level(head):
    """`head` with everything inside parentheses, brackets and angle
    brackets of templates removed (the outer characters kept)."""
    out, depth = [], 0
    for c in head:
        if c in "([":
            if depth == 0:
                out.append(c)
            depth += 1
        elif c in ")]":
            depth = max(depth - 1, 0)
            if depth == 0:
                out.append(c)
        elif depth == 0:
            out.append(c)
    return "".join(out)


ACCESS = re.compile(r"^\s*(?:(?:public|private|protected)\s*:(?!:)\s*)+")
TEMPLATE = re.compile(r"^\s*template\s*<")
CLASS = re.compile(r"^\s*(?:\[\[[^\]]*\]\]\s*)*(?:typedef\s+)?(class|struct|union|enum)\b")
OPERATOR = re.compile(r"\boperator\s*(\(\)|[^\s(]+)")
NAME = re.compile(r"((?:~?[A-Za-z_]\w*|operator\s*(?:\(\)|[^\s(]+))(?:\s*<[^()]*>)?(?:\s*::\s*~?[A-Za-z_]\w*)*)\s*\($")


def strip_template(head):
    """`head` without a leading `template <...>` (angle brackets matched)."""
    while TEMPLATE.match(head):
        i = head.index("<")
        depth = 0
        for k in range(i, len(head)):
            depth += {"<": 1, ">": -1}.get(head[k], 0)
            if depth == 0:
                head = head[k + 1:]
                break
        else:
            return head
    return head


def kind_of(head):
    """What the `{` after `head` (a declaration at namespace or class
    scope) opens: 'scope' (namespace, class, extern "C"), 'function', or
    'other' (an initializer, an enum, a member's brace initializer)."""
    h = strip_template(head).strip()
    # extern "C" (its literal blanked by then)
    if re.match(r"^(inline\s+)?namespace\b", h) or re.match(r'^extern\s*("[^"]*")?\s*$', h):
        return "scope"
    m = CLASS.match(h)
    if m and "(" not in h.split(":")[0].split("{")[0]:
        return "other" if m.group(1) == "enum" else "scope"
    top = top_level(OPERATOR.sub("operator", h))
    if "(" not in top:
        return "other"
    if re.search(r"(?<![=!<>])=(?!=)", top.split("(")[0]) or re.search(r"\)\s*=\s*", top):
        return "other"  # an initializer (a lambda's too)
    after = top[top.index(")") + 1:] if ")" in top else ""
    if re.search(r"(?<!:):(?!:)", after) and re.search(r"[\w>]\s*$", top):
        return "other"  # a member's brace initializer in a constructor's list
    return "function"


def function_name(head):
    """The declared name in a function's head (qualified; a test macro's
    suite and test too), or its first line."""
    h = strip_template(head)
    if "(" in h:
        k = h.index("(")
        m = NAME.search(h[:k + 1])
        if m:
            name = re.sub(r"\s+", "", m.group(1))
            if name in ("Test", "ParameterizedTest", "TEST", "TEST_F"):
                inner = h[k + 1:k + 1 + len(h[k + 1:].split(")")[0])]
                name += "(" + ", ".join(a.strip() for a in inner.split(",")[:2]) + ")"
            return name
    first = head.strip().splitlines()[0] if head.strip() else "?"
    return first.strip()


def c_functions(text):
    """(first line, last line, name) of each function in C/C++ `text`."""
    code = blank(text)
    newlines = [m.start() for m in re.finditer("\n", code)]

    def line_of(offset):
        return bisect.bisect_left(newlines, offset) + 1

    tokens = [(m.start(), m.group(0)) for m in re.finditer(r"[{};]", code)]
    found = []
    head_start = 0
    t = 0

    def block_end(t):
        """The index in tokens of the '}' closing the '{' at tokens[t]."""
        depth = 0
        while t < len(tokens):
            depth += {"{": 1, "}": -1}.get(tokens[t][1], 0)
            if depth == 0:
                return t
            t += 1
        return len(tokens) - 1

    while t < len(tokens):
        pos, c = tokens[t]
        if c == "{":
            head = code[head_start:pos]
            kind = kind_of(head)
            if kind == "scope":
                head_start = pos + 1
            elif kind == "function":
                t = block_end(t)
                decl = ACCESS.sub(lambda m: " " * len(m.group(0)), head)
                first = head_start + (len(decl) - len(decl.lstrip()))
                found.append((line_of(first), line_of(tokens[t][0]), function_name(head)))
                head_start = tokens[t][0] + 1
            else:  # an initializer: part of the declaration going on
                t = block_end(t)
        else:  # the end of a declaration or of a scope
            head_start = pos + 1
        t += 1
    return found


def py_functions(text, path):
    tree = ast.parse(text, path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.lineno, node.end_lineno, node.name


def source_files(root):
    for sub in sorted(set(C_DIRS + PY_DIRS)):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, sub)):
            dirnames.sort()
            for f in sorted(filenames):
                p = os.path.join(dirpath, f)
                if f.endswith(C_SUFFIXES) and sub in C_DIRS:
                    yield p, "c"
                elif f.endswith(".py") and sub in PY_DIRS:
                    yield p, "py"


def scan(root):
    """(path relative to root, first line, name, lines) of every function."""
    for path, lang in source_files(root):
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        funcs = c_functions(text) if lang == "c" else py_functions(text, path)
        for first, last, name in funcs:
            yield os.path.relpath(path, root), first, name, last - first + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", help="the source tree")
    ap.add_argument("--max", type=int, default=MAX_LINES)
    ap.add_argument("--list", action="store_true", help="print every function and its length")
    args = ap.parse_args()
    over = 0
    for path, line, name, lines in scan(args.root):
        if args.list:
            print(f"{lines}\t{path}:{line}: {name}")
        elif lines > args.max:
            print(f"{path}:{line}: {name} is {lines} lines (over {args.max})")
            over += 1
    if over:
        print(f"FAIL: {over} function(s) over {args.max} lines: split them by meaning")
        sys.exit(1)
    if not args.list:
        print(f"PASS: no function over {args.max} lines in {', '.join(sorted(set(C_DIRS + PY_DIRS)))}")


if __name__ == "__main__":
    main()
