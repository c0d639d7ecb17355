"""The command-line layer every program shares: flags, errors, a quiet start.

A program module holds only what is particular to it:

    from bert_tf import cli
    from bert_tf.serving.settings import ExportSettings  # a light module: no TensorFlow

    define_flags = cli.settings_flags(ExportSettings, required=("kind", "init_checkpoint"))

    def main(flag_values, args):
        ...  # settings = cli.settings_from_flags(ExportSettings, flag_values); a library call

    if __name__ == "__main__":
        cli.run(main, define_flags)

- Flags come from the fields of a settings dataclass: name, type and default from the
  field, help from `metadata={"help": ...}` (`"flag"` renames the flag, `"choices"` makes it
  an enum, `"old_flags"` keeps former names working for a release, each noted in one line
  when used). A field added to the dataclass is a flag with no other change.
- One error policy: a `BertTfError` (or a flag the parser refuses) prints one line,
  "PROGRAM: error: MESSAGE", and exits 2 for a bad command line, 1 for anything else; any
  other exception is one line too, with a pointer to `--verbose`, which shows tracebacks.
- A quiet start: TensorFlow's native lines that look like errors but are not (the absl
  pre-init warning its two libraries each print, "Could not find cuda drivers", "failed
  call to cuInit: ... CUDA error" on a machine without a GPU, CPU-feature notes, oneDNN's
  fallbacks; see `bert_tf.quiet`) are filtered from stderr for the whole run; anything
  else is passed on. `--verbose` or `TF_CPP_MIN_LOG_LEVEL=0` shows everything.
- The library's log lines are the program's report: what the `bert_tf` and `pipelines`
  loggers say at INFO and up (DEBUG with `--verbose`) goes to stderr as plain lines,
  warnings prefixed "warning: " (`show_library_logs`). absl's `--verbosity` (`-v`) sets
  the level when given (1: DEBUG, 0: INFO, -1: WARNING) and then also lets TensorFlow's
  own INFO lines through, which are otherwise held to WARNING.
- Logs on stderr, results on stdout: while a program runs, what it prints goes to stderr
  with its logs and progress; `result` lines alone go to stdout (see `run`).
- `--flagfile=PATH` reads flags from a file, --backend included (`bert_tf.backend`).
- `--helpshort` (and `--help`) list this program's flags, not those TensorFlow and absl
  define on import; `--helpfull` every library's too.

This module is light (no TensorFlow): TensorFlow is imported by `quiet_start` or later.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import types
import typing
from collections.abc import Callable, Iterable, Sequence

from absl import flags

from bert_tf import quiet
from bert_tf.backend import select_backend
from bert_tf.errors import BertTfError, RunStopped, raised_inside_tensorflow

HELP_FLAGS = ("--help", "-help", "--helpshort", "-helpshort", "--helpfull", "-helpfull", "-?", "--?")


def stderr_is_terminal() -> bool:
    """Whether the program's stderr is a terminal (behind the filter, fd 2 is a pipe)."""
    if quiet.active_filter is not None:
        return quiet.active_filter.terminal
    return sys.stderr.isatty()


def quiet_start(verbose: bool = False, import_tensorflow: bool = True) -> None:
    """Imports TensorFlow with its native noise filtered from stderr (see the module doc).

    Call it before anything imports TensorFlow; later calls do nothing. The filter stays
    for the life of the process (TensorFlow prints some such lines when an op first runs).
    `import_tensorflow=False` only sets the filter up, for whatever imports TensorFlow later
    (the help, which needs no TensorFlow when the program's settings module loads none).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if verbose or os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0" or "tensorflow" in sys.modules:
        return
    quiet.filter_for_the_whole_run()
    if not import_tensorflow:
        return
    import tensorflow as tf

    tf.config.list_physical_devices()  # probes the GPU (the cuInit line) behind the filter


# --- the library's log lines ------------------------------------------------------------------

LIBRARY_LOGGERS = ("bert_tf", "pipelines")
_HANDLER_NAME = "bert_tf.cli"


class _PlainFormatter(logging.Formatter):
    """The message alone; a warning (or worse) says so first."""

    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        return f"warning: {message}" if record.levelno >= logging.WARNING else message


def show_library_logs(verbose: bool = False, level: int = logging.INFO) -> None:
    """Sends the `bert_tf` and `pipelines` loggers to stderr as plain lines, `level` and up.

    Without this their INFO lines are not shown at all, and absl's handler (which the root
    logger has under `app.run`) would print the rest in glog's format, the format of the
    start-up lines the quiet start filters. `verbose` shows DEBUG lines too. Calling it
    again replaces the handler it added.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(_PlainFormatter("%(message)s"))
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if h.get_name() == _HANDLER_NAME]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG if verbose else level)
        logger.propagate = False  # not again through absl's handler on the root logger


# --- flags from settings dataclasses -------------------------------------------------------


def setting(default, help: str, **metadata) -> dataclasses.Field:  # noqa: A002 (absl's word)
    """A settings dataclass field that is also a flag: `lr: float = setting(5e-5, "Peak rate.")`.

    `metadata` may hold `flag` (the flag's name if not the field's; None: no flag),
    `choices` (an enum flag) and `old_flags` (former names that still work, see `define_old_names`).
    """
    return dataclasses.field(default=default, metadata={"help": help, **metadata})


def flag_type(annotation) -> type:
    """bool, int, float, str or list for a field annotation such as `int | None`."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        options = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        annotation = options[0] if len(options) == 1 else str
    if typing.get_origin(annotation) in (list, tuple, Sequence):
        return list
    return annotation if annotation in (bool, int, float, str) else str


def flag_name(field: dataclasses.Field) -> str:
    return field.metadata.get("flag", field.name)


def settings_fields(settings_class, skip: Iterable[str] = ()) -> list[dataclasses.Field]:
    """The fields of `settings_class` that are flags: all but `skip` and `metadata={"flag": None}`."""
    skip = set(skip)
    return [
        field
        for field in dataclasses.fields(settings_class)
        if field.name not in skip and field.metadata.get("flag", field.name) is not None
    ]


def define_settings_flags(
    settings_class,
    flag_values: flags.FlagValues,
    *,
    skip: Iterable[str] = (),
    required: Iterable[str] = (),
    defaults: dict | None = None,
    choices: dict | None = None,
) -> None:
    """Defines a flag for every field of the dataclass `settings_class` (see the module doc).

    `skip` names fields that are not flags; `required` fields must be given (checked when
    the command line is parsed); `defaults` overrides field defaults (a field without a
    default gets None); `choices` gives fields enum values known only to a heavier module.
    """
    hints = typing.get_type_hints(settings_class)
    defaults = defaults or {}
    for field in settings_fields(settings_class, skip):
        if field.name in defaults:
            default = defaults[field.name]
        elif field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = None
        define_field_flag(field, hints[field.name], default, flag_values, (choices or {}).get(field.name))
    names = {field.name: flag_name(field) for field in dataclasses.fields(settings_class)}
    if required:
        flags.mark_flags_as_required([names[name] for name in required], flag_values=flag_values)


def define_field_flag(
    field: dataclasses.Field, annotation, default, flag_values: flags.FlagValues, choices=None
) -> None:
    """The flag of one settings field: its name, type (from `annotation`), help and choices."""
    name = flag_name(field)
    help_text = field.metadata.get("help", "")
    values = choices or field.metadata.get("choices")
    kind = flag_type(annotation)
    if values:
        flags.DEFINE_enum(name, default, list(values), help_text, flag_values=flag_values)
    elif kind is bool:
        flags.DEFINE_bool(name, default, help_text, flag_values=flag_values)
    elif kind is int:
        flags.DEFINE_integer(name, default, help_text, flag_values=flag_values)
    elif kind is float:
        flags.DEFINE_float(name, default, help_text, flag_values=flag_values)
    elif kind is list:
        default = None if default is None else [str(item) for item in default]
        flags.DEFINE_list(name, default, help_text, flag_values=flag_values)
    else:
        flags.DEFINE_string(name, default, help_text, flag_values=flag_values)
    define_old_names(name, field.metadata.get("old_flags", ()), flag_values)


def argv_flag(name: str) -> str | None:
    """The value of `--name=VALUE` (or `--name VALUE`) on the command line `run` is running,
    for a program whose flags depend on it (`--task=MODULE:CLASS` defines its family's)."""
    argv = _argv or sys.argv
    for index, arg in enumerate(argv[1:], 1):
        if arg == "--":
            break
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg == f"--{name}" and index + 1 < len(argv):
            return argv[index + 1]
    return None


_argv: list[str] = []  # the command line `run` is running


def define_old_names(name: str, old_names: Iterable[str], flag_values: flags.FlagValues) -> None:
    """Keeps a renamed flag's old names working for a release: each is an alias of --`name`
    that `run` notes in one line when used (`note_old_flag_names`); --helpshort lists only --`name`.
    """
    for old_name in old_names:
        flags.DEFINE_alias(old_name, name, flag_values=flag_values)
        flag_values[old_name].help = f"Old name of --{name} (until the next release)."
        flag_values[old_name].renamed_to = name


def note_old_flag_names(flag_values: flags.FlagValues) -> None:
    """One line on stderr for each old flag name on the command line, naming the new one."""
    for name in flag_values:
        new_name = getattr(flag_values[name], "renamed_to", None)
        if new_name and flag_values[name].present:
            print(
                f"{_program_name()}: note: --{name} is now --{new_name}; the old name works until the next release",
                file=sys.stderr,
                flush=True,
            )


def settings_flags(settings_class, **options) -> Callable[[flags.FlagValues], None]:
    """A program's `define_flags`: a flag per field of `settings_class` (`options` as for
    `define_settings_flags`), defined on the `FlagValues` it is given.

    `run` calls it, so the flags exist only in the program that runs: the programs share
    flag names (--init_checkpoint, --vocab_file, ...) and are imported side by side.
    """

    def define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
        define_settings_flags(settings_class, flag_values, **options)

    return define_flags


def settings_from_flags(settings_class, flag_values: flags.FlagValues, **overrides):
    """An instance of `settings_class` from the flags `define_settings_flags` defined.

    Fields without a flag keep their defaults unless given in `overrides`. The settings'
    own checks run here (a `UsageError` names the flag).
    """
    values = {
        field.name: flag_values[flag_name(field)].value
        for field in settings_fields(settings_class)
        if flag_name(field) in flag_values
    }
    values.update(overrides)
    return settings_class(**values)


# --- running a program ----------------------------------------------------------------------


def _program_name() -> str:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return spec.name
    return os.path.basename(sys.argv[0]) or "bert_tf"


def _one_line(message: str) -> str:
    return "; ".join(part.strip() for part in str(message).splitlines() if part.strip())


_results_stream = None  # the real stdout while `run` runs a program's main


def result(line: str) -> None:
    """Prints a line of the program's results on stdout (see `run`), after all it said so far."""
    if quiet.active_filter is not None:
        quiet.active_filter.drain()
    else:
        sys.stderr.flush()
    print(line, file=_results_stream or sys.stdout, flush=True)


def fail(message: str, exit_code: int = 1, error: bool = True) -> typing.NoReturn:
    """Prints "PROGRAM: error: MESSAGE" as one line on stderr and ends the process with
    `exit_code`; `error=False` is a run that stopped on request ("PROGRAM: stopped ...").

    The process ends at once, once the line is out: a stopped run's state is saved, and a
    failed run's `with` blocks have already removed what it staged. The interpreter's own
    shutdown would spend seconds taking TensorFlow's input threads and objects apart, and can
    wait for ever: a tf.data iterator that an error left with a Python function running (its
    next rows being read) waits for that function, which waits for the lock the shutdown holds.
    """
    sys.stdout.flush()
    label = "error: " if error else ""
    print(f"{_program_name()}: {label}{_one_line(message)}", file=sys.stderr, flush=True)
    if quiet.active_filter is not None:
        quiet.active_filter.drain()  # the line is through the stderr filter before the exit
    logging.shutdown()
    os._exit(exit_code)


def _mark_key_flags(flag_values: flags.FlagValues, names: Iterable[str]) -> None:
    # Flags defined here (not in the program's own module) are listed by --helpshort only
    # once registered as key flags of the main module, which absl names after sys.argv[0].
    # Only this project's flags: the modules a program imports while defining its flags
    # (TensorFlow's TPU client, absl's test runner) define flags of their own on the way.
    for name in names:
        module = flag_values.find_module_defining_flag(name) or ""
        if getattr(flag_values[name], "renamed_to", None):
            continue  # an old name: --helpfull lists it
        if module.split(".")[0] in LIBRARY_LOGGERS or module in ("__main__", sys.argv[0]):  # the packages
            flag_values.register_key_flag_for_module(sys.argv[0], flag_values[name])


def run(
    main: Callable[[flags.FlagValues, list[str]], object],
    define_flags: Callable[[flags.FlagValues], None],
    *,
    positional: str | None = None,
    argv: Sequence[str] | None = None,
    pass_unknown_flags: bool = False,
) -> None:
    """Parses the command line, runs `main(flag_values, args)` under the error policy, exits.

    `positional` describes the positional arguments a program takes ("TEXT ..."); without
    it, any is a usage error. `args` are the positional arguments. With `pass_unknown_flags`,
    flags the program does not define are no error either: they come in `args`, for a
    program that hands them on (Beam's pipeline options), and `main` decides.

    Logs on stderr, results on stdout, in every program: while `main` runs, what is printed
    goes to stderr (the library's progress and notes, the output folder named first), and
    only what `main` passes to `result` goes to stdout (scores, predictions, and the closing
    line naming what was written), so `OUT=$(python -m ...)` captures the results alone.
    """
    from absl import app

    argv = list(sys.argv if argv is None else argv)
    try:
        # Keras fixes its backend when first imported: --backend=jax (or $KERAS_BACKEND) is
        # read before define_flags imports it.
        select_backend(argv)
    except BertTfError as error:
        fail(str(error), error.exit_code)
    verbose = "--verbose" in argv or "-verbose" in argv
    wants_help = any(arg.split("=", 1)[0] in HELP_FLAGS for arg in argv[1:])
    # The help is listed without TensorFlow; with --runner (pipelines.beam) Beam's workers run
    # the TensorFlow ops, and the program imports it only if it runs one itself.
    on_beam = any(arg.split("=", 1)[0] in ("--runner", "-runner") for arg in argv[1:])
    quiet_start(verbose=verbose, import_tensorflow=not (wants_help or on_beam))
    flag_values = flags.FLAGS
    before = set(flag_values)
    _argv[:] = argv
    try:
        define_flags(flag_values)
    except BertTfError as error:  # a program whose flags depend on the command line (--task=MODULE:CLASS)
        fail(str(error), error.exit_code)
    flags.DEFINE_bool(
        "verbose",
        False,
        "Show the traceback of an error, and TensorFlow's start-up log.",
        flag_values=flag_values,
    )
    _mark_key_flags(flag_values, [name for name in flag_values if name not in before])

    def parse(args: list[str]) -> list[str]:
        try:
            return flag_values(args, known_only=pass_unknown_flags)
        except SystemExit as exit:  # absl's help flags exit 1 after printing the help
            if wants_help:
                sys.exit(0)
            raise exit
        except flags.IllegalFlagValueError as error:
            fail(f"{error}; see --helpshort", 2)
        except flags.Error as error:
            fail(f"{error}; see --helpshort for this program's flags", 2)

    def checked_main(args: list[str]) -> None:
        if len(args) > 1 and not (positional or pass_unknown_flags):
            fail(f"unexpected arguments {' '.join(args[1:])!r}; flags are written --name=value", 2)
        _run_main(main, flag_values, args[1:])

    app.run(checked_main, argv=argv, flags_parser=parse)


def _run_main(main: Callable[[flags.FlagValues, list[str]], object], flag_values, args: list[str]) -> None:
    """`main(flag_values, args)` with the logs, the output streams and the error policy of `run`."""
    from absl import logging as absl_logging

    note_old_flag_names(flag_values)
    verbosity = flag_values["verbosity"]  # absl's --verbosity (-v): 0 INFO, 1 DEBUG, -1 WARNING, ...
    level = absl_logging.converter.absl_to_standard(verbosity.value) if verbosity.present else logging.INFO
    show_library_logs(verbose=flag_values.verbose, level=level)
    if not (flag_values.verbose or verbosity.present):
        # TensorFlow logs through absl, whose verbosity app.run sets to INFO: "Assets
        # written to ...", "Collective all_reduce tensors: ..." on every save and step.
        absl_logging.set_verbosity(absl_logging.WARNING)
    global _results_stream
    _results_stream = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            main(flag_values, args)
    except RunStopped as stop:  # its message says "stopped on SIGINT at step ..."
        fail(str(stop), stop.exit_code, error=False)
    except BertTfError as error:
        if flag_values.verbose:
            raise
        fail(str(error), error.exit_code)
    except KeyboardInterrupt:
        fail("stopped on SIGINT (Ctrl-C) before anything was saved", 130, error=False)
    except Exception as error:  # a bug or a library's internal error: one line, not a traceback
        if flag_values.verbose:
            raise
        refused = raised_inside_tensorflow(error)  # ours, raised in a tf.data reader
        if refused is not None:
            fail(str(refused), refused.exit_code)
        fail(f"{type(error).__name__}: {error} (rerun with --verbose for the traceback)", 1)
