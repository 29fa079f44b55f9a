"""Answers worth a lecturer's look: what an answer would need to tamper with its own verdict.

An answer runs in the same process as the checker that judges it (inside its student's sandbox),
so it can reach into the checker and forge its own row (ISOLATION.md, "What it does not protect
against"). The sandbox keeps that to the student's own row; this static scan, run by the grader on
the answer's text (never executed), names what such an attempt needs: the checker's or the
grader's internals, frames of the caller, processes and signals, threads, raw memory, dynamic
code. A flag is not a verdict: an honest answer may trip one (``import gc``), and obfuscated code
can avoid every one; the report lists flagged answers with their code, for a person to read.
"""

from __future__ import annotations

import ast
import hashlib

__all__ = ["flags", "fingerprint", "MAX_SCANNED"]

MAX_SCANNED = 200_000         # characters of an answer this scan parses (the rest: one flag)

_MODULES = {
    "ctypes": "raw memory (ctypes)", "gc": "the garbage collector (gc: reaches any object)",
    "subprocess": "starts processes (subprocess)", "signal": "signals (signal)",
    "threading": "threads (threading)", "_thread": "threads (_thread)",
    "multiprocessing": "processes (multiprocessing)", "inspect": "frames of the caller (inspect)",
    "importlib": "loads modules by name (importlib)", "builtins": "rewrites built-ins (builtins)",
    "socket": "network (socket)", "mmap": "raw memory (mmap)", "pickle": "pickle",
    "marshal": "code objects (marshal)", "types": "builds code objects (types)",
    "sys": None, "os": None,
}
_ATTRIBUTES = {
    "_getframe": "frames of the caller (sys._getframe)", "f_back": "frames of the caller (f_back)",
    "f_locals": "frames of the caller (f_locals)", "f_globals": "frames of the caller (f_globals)",
    "modules": None, "kill": "kills processes (os.kill)", "killpg": "kills processes (os.killpg)",
    "fork": "forks (os.fork)", "system": "runs a shell command (os.system)",
    "popen": "runs a shell command (os.popen)", "setprofile": "hooks every call (setprofile)",
    "settrace": "hooks every line (settrace)", "__subclasses__": "walks the class tree",
    "__globals__": "a function's globals (__globals__)", "__code__": "rewrites code (__code__)",
    "__builtins__": "rewrites built-ins", "__dict__": None,
}
_CALLS = {"eval": "dynamic code (eval)", "exec": "dynamic code (exec)",
          "compile": "dynamic code (compile)", "__import__": "imports by name (__import__)",
          "globals": "rewrites module globals (globals())", "setattr": None}
_STRINGS = ("/proc", "normlib.classroom", "normlib.exercises._", "_from_result", "CheckResult")


def fingerprint(answer: str) -> str:
    """sha256 of the answer's text: the same answer, the same fingerprint, in results.jsonl."""
    return hashlib.sha256(answer.encode("utf-8", "surrogatepass")).hexdigest()


def flags(answer: str, imports: str = "") -> list[str]:
    """Why this answer (and the import lines of the cells before it) needs a look; [] when
    nothing stands out. Never raises."""
    text = f"{imports}\n{answer}"
    found: list[str] = []

    def add(reason):
        if reason and reason not in found:
            found.append(reason)

    if len(text) > MAX_SCANNED:
        return [f"longer than {MAX_SCANNED:,} characters: not scanned"]
    for s in _STRINGS:
        if s in text:
            add(f"names {s}")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return found
    try:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""]
                for name in names:
                    root = name.split(".")[0]
                    if name.startswith(("normlib.classroom", "normlib.exercises._")):
                        add(f"imports {name}: the grader's or checker's internals")
                    add(_MODULES.get(root))
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                        "normlib.exercises"):
                    for a in node.names:
                        if a.name.startswith("_"):
                            add(f"imports {a.name} from {node.module}: the checker's internals")
            elif isinstance(node, ast.Attribute):
                add(_ATTRIBUTES.get(node.attr))
                if node.attr == "modules" and isinstance(node.value, ast.Name) and \
                        node.value.id == "sys":
                    add("rewrites loaded modules (sys.modules)")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                add(_CALLS.get(node.func.id))
    except RecursionError:
        add("nested too deeply to scan")
    return found
