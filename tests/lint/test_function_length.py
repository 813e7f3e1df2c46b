#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""function_length.py's scan on planted sources: the shapes this tree's C++
and Python take (found with their names and lengths, not mistaken for
functions), and a 121-line function refused where a 120-line one passes."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import function_length  # noqa: E402

SCRIPT = os.path.join(HERE, "function_length.py")

SHAPES = r'''// a { in a comment
#define BLOCK(x) { x; }
namespace amdcr {
namespace {
constexpr int kTable[] = {1, 2, 3};
constexpr unsigned long long kFlags = 0x8000'0000'0000'0123ull;
const char *kBraces = "{ not a block }";
const char *kRaw = R"x(a raw { string ")x";
enum class Kind : int { A, B };
struct Pair {
	int a = 0, b{0};
	int sum() const { return a + b; }
};
} // namespace

template <typename T, typename = void>
T twice(T v)
{
	auto f = [](T x) { return x + x; };
	return f(v);
}

class Widget : public Base {
public:
	Widget(int a, int b) : a_(a), b_{b}, c_{}
	{
		a_ += b_;
	}
	bool operator==(const Widget &o) const { return a_ == o.a_; }
	~Widget() override {}

private:
	int a_, b_, c_;
};

} // namespace amdcr

extern "C" {
int c_entry(void)
{
	return '}';
}
}

Test(suite, name, .init = setup)
{
	cr_assert(1);
}
'''

WANT = [
    ("sum", 12, 1), ("twice", 16, 6), ("Widget", 25, 4), ("operator==", 29, 1), ("~Widget", 30, 1),
    ("c_entry", 39, 4), ("Test(suite, name)", 45, 4),
]


def c_function(lines, name="planted"):
    """A C++ function of `lines` lines (its declaration to its brace)."""
    body = ["\tx++;"] * (lines - 3)
    return "\n".join([f"void {name}(int x)", "{"] + body + ["}"]) + "\n"


def py_function(lines, name="planted"):
    return "\n".join([f"def {name}(x):"] + ["    x += 1"] * (lines - 1)) + "\n"


class Scan(unittest.TestCase):
    def test_shapes_of_this_tree(self):
        got = [(name, first, last - first + 1) for first, last, name in function_length.c_functions(SHAPES)]
        got = [(n.replace("amdcr::", ""), f, ln) for n, f, ln in got]
        self.assertEqual(sorted(got, key=lambda g: g[1]),
                         [(n, f, ln) for n, f, ln in WANT])

    def run_on(self, files):
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as fh:
                    fh.write(text)
            return subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)

    def test_120_lines_pass(self):
        r = self.run_on({"src/a.cpp": "\n" + c_function(120), "tests/b.py": py_function(120)})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_121_lines_are_refused_naming_file_line_and_function(self):
        r = self.run_on({"src/x/a.cpp": "// one line\n" + c_function(121, "too_long"),
                         "tests/emulator/b.h": SHAPES,
                         "tests/c.py": "\n" + py_function(121, "too_long_py")})
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("src/x/a.cpp:2: too_long is 121 lines (over 120)", r.stdout)
        self.assertIn("tests/c.py:2: too_long_py is 121 lines (over 120)", r.stdout)
        self.assertIn("2 function(s) over 120 lines", r.stdout)

    def test_known_functions_of_this_tree(self):
        root = os.path.normpath(os.path.join(HERE, "..", ".."))

        def lengths(rel):
            with open(os.path.join(root, rel)) as fh:
                text = fh.read()
            funcs = function_length.py_functions(text, rel) if rel.endswith(".py") else \
                function_length.c_functions(text)
            return {name: last - first + 1 for first, last, name in funcs}
        # Lengths counted by hand: declaration line to closing brace.
        self.assertEqual(lengths("src/plugin/restore_task_files.cpp").get("TaskRenderFiles::file_for"), 22)
        self.assertEqual(lengths("src/base/process_local.h").get("get"), 9)
        self.assertIn("c_functions", lengths("tests/lint/function_length.py"))


if __name__ == "__main__":
    unittest.main()
