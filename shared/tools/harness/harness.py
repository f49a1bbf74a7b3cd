# NoETL-Go python tool harness (shared/tools). Run by the worker as
#
#     python3 -B harness.py REQUEST.json RESULT.json
#
# REQUEST: {"code", "filename", "input", "libs", "execution_id", "step", "context"}.
# RESULT (written last, so a crash leaves no file):
#     {"ok": true,  "data": <value>}
#     {"ok": false, "message": "<traceback's last line>", "phase": "compile|libs|run"}
# The full traceback (harness frames removed) goes to stderr. Exit status: 0 on
# success, 1 on a reported failure. User prints never touch RESULT.
#
# Contract (rulings R-P1..R-P3, and NoETL's python tool where it differs):
#   * compile() the body; on "'return' outside function" the body becomes the body of
#     a function of (args, input_data), which is called;
#   * globals: the modules os, json, datetime, uuid and the helpers get_val,
#     make_serializable, now_utc, format_iso8601, deep_merge (NoETL's pre-imports);
#     args, input_data (the input map), context (the render context the step could
#     read, plus execution_id, step and input), execution_id, step, data (context's
#     data, else its result, unless an input is named data); then every input key that
#     is an identifier (input keys win); then the `libs` imports;
#   * data: the return value if not None, else main()'s if main is defined and gives
#     one, else a `result` global, else null. main's parameters are filled by name
#     from the input, then context's input and data, then context itself; one named
#     context gets context; **kwargs gets every input; a coroutine main is awaited;
#   * SystemExit(0) / SystemExit(None) is success.

import ast
import builtins
import datetime
import importlib
import inspect
import json
import keyword
import linecache
import math
import os
import sys
import traceback
import uuid

HARNESS_FILE = __file__
BODY_FUNC = "__noetl_step_body__"


class Failure(Exception):
    """A failure already described: message (one line) and phase."""

    def __init__(self, message, phase):
        super().__init__(message)
        self.message = message
        self.phase = phase


def exception_line(exc):
    lines = "".join(traceback.format_exception_only(type(exc), exc)).rstrip().splitlines()
    return lines[-1].strip() if lines else type(exc).__name__


def print_traceback(exc):
    # Drop the harness's own frames: the user wants to see their code.
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == HARNESS_FILE:
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    stream = sys.__stderr__
    try:
        stream.write(text)
        stream.flush()
    except Exception:
        pass


def exit_ok(exc):
    """SystemExit(0) and SystemExit(None) are success."""
    return exc.code is None or exc.code == 0


def compile_body(code, filename):
    """Returns (code object, wrapped?)."""
    try:
        return compile(code, filename, "exec", dont_inherit=True), False
    except SyntaxError as exc:
        if exc.msg != "'return' outside function":
            raise
    # Wrap through the AST, not through text, so string literals and line numbers stay
    # exactly as written.
    tree = ast.parse(code, filename)
    holder = ast.parse("def %s(args, input_data):\n    pass\n" % BODY_FUNC)
    func = holder.body[0]
    func.body = tree.body or [ast.Pass()]
    module = ast.Module(body=[func], type_ignores=[])
    ast.fix_missing_locations(module)
    return compile(module, filename, "exec", dont_inherit=True), True


def import_libs(libs, g):
    if libs is None:
        return
    if isinstance(libs, list):
        items = [(None, name) for name in libs]
    elif isinstance(libs, dict):
        items = list(libs.items())
    else:
        raise Failure("libs: expected an object {alias: module} or a list of modules", "libs")
    for alias, spec in items:
        if isinstance(spec, str):
            module = spec
            try:
                if alias is None:
                    importlib.import_module(module)
                    top = module.split(".")[0]
                    g[top] = importlib.import_module(top)
                else:
                    g[alias] = importlib.import_module(module)
            except Exception as exc:
                print_traceback(exc)
                raise Failure('libs: cannot import module "%s"%s: %s'
                              % (module, "" if alias is None else ' as "%s"' % alias, exception_line(exc)), "libs")
        elif isinstance(spec, dict) and alias is not None:
            frm = spec.get("from")
            name = spec.get("import")
            if not isinstance(name, str) or not name or (frm is not None and not isinstance(frm, str)):
                raise Failure('libs: alias "%s": expected {from: module, import: name}' % alias, "libs")
            module = frm or name
            try:
                if frm:
                    mod = importlib.import_module(frm)
                    try:
                        g[alias] = getattr(mod, name)
                    except AttributeError:
                        # `from pkg import submodule` when the package does not
                        # import it itself
                        g[alias] = importlib.import_module(frm + "." + name)
                else:
                    g[alias] = importlib.import_module(name)
            except Exception as exc:
                print_traceback(exc)
                raise Failure('libs: cannot import "%s" from module "%s" as "%s": %s'
                              % (name, module, alias, exception_line(exc)), "libs")
        else:
            raise Failure("libs: entry %r: expected a module name" % (alias if alias is not None else spec,), "libs")


def main_kwargs(fn, inp, context):
    """Arguments for main, by parameter name: the input, then context's input and
    data, then context; a parameter named context gets context."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    sources = [inp]
    for key in ("input", "data"):
        if isinstance(context.get(key), dict):
            sources.append(context[key])
    sources.append(context)
    kwargs = {}
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            raise Failure("main(*%s): positional varargs are not supported; name the parameters" % p.name, "run")
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        if p.name == "context":
            kwargs["context"] = context
            continue
        for src in sources:
            if p.name in src:
                kwargs[p.name] = src[p.name]
                break
        else:
            if p.default is p.empty:
                raise Failure("main() needs argument '%s': give it in the step's input" % p.name, "run")
    if any(p.kind == p.VAR_KEYWORD for p in params):
        for src in sources[:-1]:
            for k, v in src.items():
                kwargs.setdefault(k, v)
    return kwargs


def call_main(fn, inp, context):
    ret = fn(**main_kwargs(fn, inp, context))
    if inspect.iscoroutine(ret):
        import asyncio  # only then: importing it costs every step's start

        ret = asyncio.run(ret)
    return ret


# NoETL's pre-imported helpers.

def get_val(obj, keys, default=None):
    """obj followed along keys (dict keys, list indexes); default when a step is missing."""
    if not isinstance(keys, (list, tuple)):
        keys = [keys]
    for k in keys:
        try:
            obj = obj[k]
        except (KeyError, IndexError, TypeError):
            return default
    return obj


def make_serializable(value):
    """value with datetimes as ISO text and other non-JSON values as text."""
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): make_serializable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [make_serializable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


def format_iso8601(dt):
    return dt.astimezone(datetime.timezone.utc).isoformat()


def deep_merge(dest, source):
    """source merged into a copy of dest, objects key by key, all the way down."""
    if isinstance(dest, dict) and isinstance(source, dict):
        out = dict(dest)
        for k, v in source.items():
            out[k] = deep_merge(out[k], v) if k in out else v
        return out
    return source


def plain(value, seen):
    """JSON-ready copy: what json.dumps(default=str) would accept, with str() for the
    rest, and never NaN/Infinity (not JSON)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, (dict, list, tuple)):
        if id(value) in seen:
            return str(value)
        seen.add(id(value))
        try:
            if isinstance(value, dict):
                out = {}
                for k, v in value.items():
                    if isinstance(k, str):
                        key = k
                    elif k is None or isinstance(k, (bool, int, float)):
                        key = json.dumps(k)
                    else:
                        key = str(k)
                    out[key] = plain(v, seen)
                return out
            return [plain(v, seen) for v in value]
        finally:
            seen.discard(id(value))
    return str(value)


def run(req):
    code = req.get("code")
    filename = req.get("filename") or "<code>"
    inp = req.get("input")
    if not isinstance(inp, dict):
        inp = {}
    if not isinstance(code, str):
        raise Failure("code: expected a string", "compile")

    # Source lines in tracebacks for inline code too.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)

    g = {"__name__": "__noetl__", "__builtins__": builtins, "__file__": filename,
         "os": os, "json": json, "datetime": datetime, "uuid": uuid, "get_val": get_val,
         "make_serializable": make_serializable, "now_utc": now_utc,
         "format_iso8601": format_iso8601, "deep_merge": deep_merge}
    context = req.get("context")
    context = dict(context) if isinstance(context, dict) else {}
    context.update({"execution_id": req.get("execution_id"), "step": req.get("step"), "input": inp})
    g["args"] = inp
    g["input_data"] = inp
    g["context"] = context
    g["execution_id"] = req.get("execution_id")
    g["step"] = req.get("step")
    for key in ("data", "result"):
        if key in context:
            g["data"] = context[key]
            break
    for k, v in inp.items():
        if isinstance(k, str) and k.isidentifier() and not keyword.iskeyword(k):
            g[k] = v
    import_libs(req.get("libs"), g)

    had_result = "result" in g
    input_result = g.get("result")

    def bound_result():
        # A `result` global counts first only when the code bound it; an input named
        # `result` is a fallback after main().
        if "result" not in g:
            return None
        if had_result and g["result"] is input_result:
            return None
        return g["result"]

    try:
        obj, wrapped = compile_body(code, filename)
    except SyntaxError as exc:
        print_traceback(exc)
        raise Failure(exception_line(exc), "compile")

    ret = None
    exited = False
    try:
        exec(obj, g)
        if wrapped:
            ret = g[BODY_FUNC](inp, inp)
    except SystemExit as exc:
        if not exit_ok(exc):
            print_traceback(exc)
            raise Failure(exception_line(exc), "run")
        exited = True
    finally:
        g.pop(BODY_FUNC, None)

    if ret is not None:
        return ret
    fn = g.get("main")
    if callable(fn) and not exited:
        try:
            ret = call_main(fn, inp, context)
        except SystemExit as exc:
            if not exit_ok(exc):
                print_traceback(exc)
                raise Failure(exception_line(exc), "run")
            ret = None
        if ret is not None:
            return ret
    res = bound_result()
    if res is not None:
        return res
    return input_result


def write_result(path, payload):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f, ensure_ascii=False, allow_nan=False)


def entry():
    req_path, result_path = sys.argv[1], sys.argv[2]
    with open(req_path, "r", encoding="utf-8") as f:
        req = json.load(f)
    try:
        data = run(req)
        payload = {"ok": True, "data": plain(data, set())}
        status = 0
    except Failure as exc:
        payload = {"ok": False, "message": exc.message, "phase": exc.phase}
        status = 1
    except BaseException as exc:  # the user's exception (KeyboardInterrupt included)
        print_traceback(exc)
        payload = {"ok": False, "message": exception_line(exc), "phase": "run"}
        status = 1
    try:
        sys.stdout.flush()
    except Exception:
        pass
    write_result(result_path, payload)
    sys.exit(status)


if __name__ == "__main__":
    entry()
