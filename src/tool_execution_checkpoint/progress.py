"""A progress line for long CLI work (``list``, ``prune``), with the standard library only.

:class:`Progress` is told the running count with :meth:`Progress.update` and closed with
:meth:`Progress.finish` (or used as a context manager). What it writes depends on its
stream, normally stderr:

- **A terminal** (``stream.isatty()``): one line redrawn in place with ``\\r``, at most
  every ``redraw_every`` seconds and once more at the end, then a newline::

      listing [    ====            ] 12,500 records  3,120/s  0:04

  The bar moves back and forth (the total is unknown: stores do not count their records
  cheaply); with a ``total`` it fills instead and shows the percentage. A shorter line
  is padded with spaces so nothing of the longer one is left behind.
- **Anything else** (a pipe, a file, a CI log): no ``\\r`` and no bar. A plain line such
  as ``listing: 12,500 records, 3,120/s, 0:04`` at most every ``report_every`` seconds,
  and a last one at the end only if a periodic one was written. A run shorter than
  ``report_every`` writes nothing, so piped output and JSON on stdout stay clean and
  stderr stays empty.

The count, rate (count per second since the start) and elapsed time come from ``clock``
(``time.monotonic`` unless given), so tests drive it with a fake clock.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["Progress", "format_elapsed"]


def format_elapsed(seconds: float) -> str:
    """``m:ss`` below an hour, ``h:mm:ss`` from an hour on (whole seconds, rounded down)."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """A progress line on ``stream`` (stderr by default): redrawn in place on a terminal,
    plain periodic lines otherwise (see the module docstring).

    Args:
        label: What is being done, e.g. ``"listing"``.
        unit: What is counted, e.g. ``"records"``.
        total: The count at which the work is done, if known (the bar then fills).
        stream: Where to write; ``sys.stderr`` (as it is now) when None.
        clock: Seconds from an arbitrary start, non-decreasing.
        redraw_every: Least seconds between two redraws on a terminal.
        report_every: Least seconds between two plain lines elsewhere.
        width: The bar's width in characters.
    """

    def __init__(
        self,
        label: str,
        *,
        unit: str = "records",
        total: int | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        redraw_every: float = 0.1,
        report_every: float = 10.0,
        width: int = 20,
    ) -> None:
        self.label = label
        self.unit = unit
        self.total = total
        self.stream = sys.stderr if stream is None else stream
        self.terminal = _is_terminal(self.stream)
        self._clock = clock
        self._redraw_every = redraw_every
        self._report_every = report_every
        self._width = max(4, width)
        self._started = clock()
        self._last_written: float | None = None
        self._drawn_width = 0
        self._frame = 0
        self._finished = False
        self.count = 0

    # --- what is shown --------------------------------------------------------------------

    def _rate(self, elapsed: float) -> str:
        return f"{self.count / elapsed:,.0f}/s" if elapsed > 0 else "-/s"

    def _bar(self) -> str:
        if self.total:
            filled = min(self._width, self._width * self.count // self.total)
            percent = min(100, 100 * self.count // self.total)
            return f"[{'=' * filled}{' ' * (self._width - filled)}] {percent:3d}%"
        block = 4
        span = self._width - block
        position = self._frame % (2 * span) if span else 0
        if position > span:
            position = 2 * span - position
        return f"[{' ' * position}{'=' * block}{' ' * (span - position)}]"

    def line(self) -> str:
        """The terminal line for the current count, without ``\\r`` or padding."""
        elapsed = self._clock() - self._started
        return (
            f"{self.label} {self._bar()} {self.count:,} {self.unit}"
            f"  {self._rate(elapsed)}  {format_elapsed(elapsed)}"
        )

    def plain_line(self) -> str:
        """The line written where there is no terminal."""
        elapsed = self._clock() - self._started
        return (
            f"{self.label}: {self.count:,} {self.unit}, {self._rate(elapsed)}, "
            f"{format_elapsed(elapsed)}"
        )

    # --- writing --------------------------------------------------------------------------

    def _draw(self) -> None:
        text = self.line()
        padding = " " * max(0, self._drawn_width - len(text))
        self.stream.write(f"\r{text}{padding}")
        self.stream.flush()
        self._drawn_width = len(text)
        self._frame += 1

    def _report(self) -> None:
        self.stream.write(self.plain_line() + "\n")
        self.stream.flush()

    def update(self, count: int) -> None:
        """Record that ``count`` units are done so far; write if it is time to."""
        if self._finished:
            return
        self.count = count
        now = self._clock()
        if self.terminal:
            if self._last_written is None or now - self._last_written >= self._redraw_every:
                self._draw()
                self._last_written = now
        elif now - (self._last_written or self._started) >= self._report_every:
            self._report()
            self._last_written = now

    def finish(self) -> None:
        """Write the final state: on a terminal the line once more and a newline (if
        anything was drawn); elsewhere a last plain line if a periodic one was written.
        Idempotent."""
        if self._finished:
            return
        self._finished = True
        if self._last_written is None:
            return
        if self.terminal:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()
        else:
            self._report()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.finish()
