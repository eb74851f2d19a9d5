"""Progress bar: tqdm when installed, else a carriage-return bar on stderr."""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    """Counts consumed samples; write() prints a line above the bar."""

    def __init__(self, total: int, enabled: bool):
        self.total = total
        self.done = 0
        self.lock = threading.Lock()
        self.start = time.perf_counter()
        self.last_draw = 0.0
        self.tqdm = None
        self.enabled = enabled and sys.stderr.isatty()
        if self.enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.tqdm = tqdm(total=total, unit="sample", desc="samples consumed", file=sys.stderr,
                                 dynamic_ncols=True)

    def update(self, n: int) -> None:
        with self.lock:
            self.done += n
            if self.tqdm is not None:
                self.tqdm.update(n)
            elif self.enabled:
                now = time.perf_counter()
                if now - self.last_draw >= 0.1 or self.done >= self.total:
                    self.last_draw = now
                    self._draw()

    def _draw(self) -> None:
        width = 30
        share = self.done / self.total if self.total else 1.0
        filled = int(round(width * share))
        elapsed = time.perf_counter() - self.start
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {100 * share:5.1f}%  "
                         f"{self.done:,}/{self.total:,} samples consumed  {elapsed:5.1f}s")
        sys.stderr.flush()

    def write(self, text: str) -> None:
        with self.lock:
            if self.tqdm is not None:
                self.tqdm.write(text, file=sys.stdout)
                return
            if self.enabled:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
            print(text, flush=True)
            if self.enabled:
                self._draw()

    def close(self) -> None:
        with self.lock:
            if self.tqdm is not None:
                self.tqdm.close()
            elif self.enabled:
                self._draw()
                sys.stderr.write("\n")
                sys.stderr.flush()

