"""``tool-checkpoint check-store``'s runner: every check of the conformance suite, the
model-based harness and the threaded stress on fresh stores of a factory or of a store
URL's scratch space (:mod:`.scratch`), one printed line per check; on a URL, the kill
storm last. The command line only parses its arguments and calls :func:`check_store`."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import unittest
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from ..records import Binding
from ..stores.core import StoreError, checkpoint_key
from ..stores.opening import is_store_url
from . import conformance, processes
from .scratch import ScratchSpace, scratch_space

__all__ = ["STORM_FACTORY", "BadTarget", "check_store", "run_checks"]

STORM_FACTORY = "tool_execution_checkpoint.testing.processes:url_store"
"""The factory check-store's storm workers open the store's URL with."""

_PROBE = checkpoint_key(Binding("check-store", "probe", "tool", "1", "sha256:0"))


class BadTarget(Exception):
    """A factory that cannot be loaded (the command line's exit 2); its message names
    why, never a store URL."""


def _first_line(error: BaseException, hidden: Sequence[str]) -> str:
    """The first line of ``error``'s message (its class name when it has none), each of
    ``hidden`` replaced by ``***``."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    for secret in hidden:
        first = first.replace(secret, "***")
    return first


def run_checks(
    make_store: Callable[[], Any],
    operable: bool,
    examples: int | None,
    hidden: Sequence[str],
    extra: Sequence[tuple[str, Callable[[], object]]] = (),
) -> int:
    """Run every check on fresh stores from ``make_store`` (the listing and pruning checks
    too when ``operable``), then each ``(name, check)`` of ``extra``, print one line each
    (no message shows one of ``hidden``); return how many failed."""
    base = conformance.OperableStoreConformance if operable else conformance.StoreConformance
    checks = type(
        "CheckStore",
        (base,),
        {"make_store": staticmethod(make_store), "harness_examples": examples},
    )
    failed = 0
    for name in sorted(n for n in dir(checks) if n.startswith("test_")):
        suite = checks()
        try:
            getattr(suite, name)()
        except unittest.SkipTest as skipped:  # a check the factory gives no hook for
            print(f"skip  {name[5:]}: {skipped}", flush=True)
        except Exception as error:  # a failed check is reported, then the next one runs
            failed += 1
            print(f"FAIL  {name[5:]}: {_first_line(error, hidden)}", flush=True)
        else:
            print(f"ok    {name[5:]}", flush=True)
        finally:
            suite.teardown_method()
    for name, check in extra:
        try:
            check()
        except Exception as error:  # as for the checks above
            failed += 1
            print(f"FAIL  {name}: {_first_line(error, hidden)}", flush=True)
        else:
            print(f"ok    {name}", flush=True)
    print(f"{failed} of the checks failed" if failed else "the store passed every check")
    return failed


def _check_factory(factory: str, examples: int | None) -> int:
    try:
        # check-store's factory takes no argument (a kill storm's worker takes one)
        make_store = cast(Callable[[], Any], processes.load_factory(factory))
    except (ImportError, AttributeError, ValueError, TypeError) as error:
        raise BadTarget(f"cannot load the factory: {error}") from None
    probe = make_store()
    operable = hasattr(probe, "list_records")
    close = getattr(probe, "close", None)
    if callable(close):
        close()
    return run_checks(make_store, operable, examples, ())


def _storm(scratch: ScratchSpace) -> None:
    """The kill storm at its defaults on one more fresh store of ``scratch``, which every
    worker process opens by its URL; AssertionError naming the first problem, if any."""
    store = scratch.make_store()  # its file or table made before the workers race to
    store.get(_PROBE)
    url, options = scratch.location(len(scratch.stores))
    argument = json.dumps({"url": url, "options": options})
    with tempfile.TemporaryDirectory(prefix="tec-check-storm-") as directory:
        report = processes.kill_storm(STORM_FACTORY, argument, directory=Path(directory))
    if report.problems:
        more = f" (and {len(report.problems) - 1} more)" if len(report.problems) > 1 else ""
        raise AssertionError(f"{report.problems[0].splitlines()[0]}{more}")


def _check_url(
    url: str, examples: int | None, schema: str | None, storm: bool, hidden: Sequence[str]
) -> int:
    scratch = scratch_space(url, **({} if schema is None else {"schema": schema}))
    reached = False
    try:
        probe = scratch.make_store()  # a URL the store cannot parse fails here (exit 2)
        print(scratch.describe(), flush=True)
        # The probe is used first: an unreachable or misconfigured store is exit 4, not a
        # failure of every check.
        probe.get(_PROBE)
        reached = True
        extra = [("kill_storm", lambda: _storm(scratch))] if storm else []
        failed = run_checks(scratch.make_store, True, examples, hidden, extra)
    except BaseException:
        try:
            scratch.remove()
        except StoreError as error:
            if reached:  # a store never reached holds nothing worth a second message
                print(f"tool-checkpoint: {error}", file=sys.stderr)
        raise
    print(scratch.remove())
    return failed


def is_url(target: str) -> bool:
    """Whether ``target`` is a store URL (not a factory, module:callable): it has ``://``
    or starts with a scheme a store registered (``sqlite:relative/path``)."""
    return "://" in target or is_store_url(target)


def check_store(
    target: str,
    *,
    examples: int | None = None,
    schema: str | None = None,
    storm: bool = True,
    hidden: Sequence[str] = (),
) -> int:
    """Run every check on ``target``, a factory (``module:callable`` returning a fresh,
    empty store on each call) or a store URL (each check in a scratch space of its own
    inside the URL's target, every space removed at the end, also when a check fails or
    the run is interrupted), printing one line per check; return how many failed.

    Args:
        examples: The harness's examples (default: the active profile's).
        schema: Where a PostgreSQL URL's scratch tables go (``public``).
        storm: On a URL, end with the kill storm.
        hidden: What no printed line may show (the URL's passwords).

    Raises:
        BadTarget: A factory that cannot be loaded.
        CheckpointError: INVALID_ARGUMENT for a URL no store with a scratch space takes.
        StoreError: The store's, when the first fresh store cannot be used or a scratch
            space cannot be removed (the message names what is left).
    """
    # Hypothesis keeps its example database and caches under HYPOTHESIS_STORAGE_DIRECTORY
    # (./.hypothesis by default): a directory of this run's own, deleted at the end.
    with tempfile.TemporaryDirectory(prefix="tec-check-hypothesis-") as storage:
        previous = os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = storage
        try:
            if is_url(target):
                return _check_url(target, examples, schema, storm, hidden)
            return _check_factory(target, examples)
        finally:
            if previous is None:
                del os.environ["HYPOTHESIS_STORAGE_DIRECTORY"]
            else:
                os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = previous
