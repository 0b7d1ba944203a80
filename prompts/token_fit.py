"""Searching for the largest candidate that fits a token target, counting as little as
possible: a bisection over candidate sizes that counts only candidates of about the target's
size, and the last-resort cut of one line by characters."""

from __future__ import annotations

from collections.abc import Callable

Counter = Callable[[str], int]

# No token of a byte-level BPE vocabulary covers more characters than this (cl100k_base's
# longest token is 128 bytes), so a text longer than max_tokens * this cannot fit: it is cut
# without being counted. A counter with longer tokens would only lose the "unchanged" shortcut
# for texts that would have fit; the budget still holds because results are always counted.
MAX_CHARS_PER_TOKEN = 128


def chars_marker(n: int) -> str:
    return f"[... {n:,} chars cut ...]"


class Budget:
    """Counts candidates against the target, skipping those far too long to be worth it."""

    def __init__(self, max_tokens: int, count: Counter, chars_per_token: float) -> None:
        self.max_tokens = max_tokens
        self.count = count
        # Twice the sampled ratio: a candidate longer than that will not fit in practice, and
        # counting it (a large string) is what would make excerpting slow.
        self.char_limit = min(
            max_tokens * MAX_CHARS_PER_TOKEN, int(max_tokens * chars_per_token * 2) + 256
        )

    def measure(self, text: str) -> int | None:
        """The token count, or None for a candidate too long to be worth counting."""
        return None if len(text) > self.char_limit else self.count(text)

    def fits(self, text: str) -> bool:
        n = self.measure(text)
        return n is not None and n <= self.max_tokens


def bisect_max(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """Largest k in [lo, hi) with ok(k), given ok(lo) and not ok(hi); ok grows monotone."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def largest(
    lo: int,
    hi: int,
    measure: Callable[[int], int | None],
    limit: int,
    *,
    t_lo: int,
    guess: int | None = None,
    slack: float = 0.0,
) -> int:
    """About the largest k in [lo, hi) with measure(k) <= limit.

    Given measure(lo) == t_lo <= limit, and k = hi over the limit; sizes grow with k.
    Probes `guess` first, then interpolates on the measured counts, bisecting on every
    other step so a bad estimate still converges in log time. Stops once the bracket is
    within `slack` (a fraction of lo): a few lines short of the exact optimum is fine,
    another count call is not.
    """
    t_hi: int | None = None
    step = 0
    while hi - lo > max(1, int(lo * slack)):
        if step == 0 and guess is not None:
            mid = guess
        elif step % 2 == 1 and t_hi is not None and t_hi > t_lo:
            mid = lo + int((hi - lo) * (limit - t_lo) / (t_hi - t_lo))
        elif step % 2 == 1 and t_hi is None and lo > 0 and t_lo > 0:
            mid = int(lo * limit / t_lo)
        else:
            mid = (lo + hi) // 2
        mid = min(max(mid, lo + 1), hi - 1)
        step += 1
        t = measure(mid)
        if t is not None and t <= limit:
            lo, t_lo = mid, t
        else:
            hi, t_hi = mid, t
    return lo


def chars_per_token(text: str, count: Counter) -> float:
    # Characters per token of a sample from the end, where the interesting part of a log is.
    sample = text[-16_000:]
    n = count(sample)
    return len(sample) / n if n else float(MAX_CHARS_PER_TOKEN)


def fits_unchanged(text: str, max_tokens: int, count: Counter) -> bool:
    if len(text) > max_tokens * MAX_CHARS_PER_TOKEN:
        return False
    over = getattr(count, "over", None)
    if over is not None:  # a counter that stops once over (context.LineSumCounter): no probe needed
        return not over(text, max_tokens)
    # A prefix that is already over budget settles it without counting megabytes. A prefix
    # can count a little more than the whole (its last word split differently), never more
    # than one token's worth of bytes, hence the margin.
    probe = max_tokens * 16 + 1024
    if len(text) > 2 * probe and count(text[:probe]) > max_tokens + MAX_CHARS_PER_TOKEN:
        return False
    return count(text) <= max_tokens


def cut_line(line: str, cap: int) -> str:
    if len(line) <= cap:
        return line
    marker = f" {chars_marker(len(line) - cap)} "
    head = cap * 2 // 3
    return line[:head] + marker + line[len(line) - (cap - head) :]


def char_cut(text: str, max_tokens: int, count: Counter, head_share: float) -> tuple[str, int]:
    """The last resort: text[:h] + marker + text[-t:], as long as the budget allows."""
    ratio = chars_per_token(text, count)
    budget = Budget(max_tokens, count, ratio)

    def render(k: int) -> str:
        h = int(k * head_share)
        t = k - h
        parts = [text[:h]] if h else []
        parts.append(chars_marker(len(text) - k))
        if t:
            parts.append(text[len(text) - t :])
        return "\n".join(parts)

    if budget.fits(text):  # a log line stripped of its timestamp may fit whole
        return text, 0
    t0 = budget.measure(render(0))
    if t0 is None or t0 > max_tokens:
        return "", len(text)
    guess = int(max_tokens * ratio * 0.9)
    k = largest(
        0,
        len(text),
        lambda k: budget.measure(render(k)),
        max_tokens,
        t_lo=t0,
        guess=guess,
        slack=0.01,
    )
    return render(k), len(text) - k
