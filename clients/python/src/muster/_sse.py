"""An incremental Server-Sent Events parser (the WHATWG "event stream
interpretation" rules), the same as clients/go/sse.go.

A leading byte-order mark is dropped; lines end with CR LF, LF or CR; a line
starting with a colon is a comment; ``field: value`` loses one space after the
colon, a line without a colon is a field with an empty value; data lines are
joined with LF; a blank line dispatches the event unless it had no data field;
unknown fields are ignored, so is ``retry`` (the observer has its own backoff);
an id containing NUL is ignored; an event not ended by a blank line before the
end of the stream is discarded.

:class:`SSEParser` is fed bytes in chunks of any size and returns the events
completed by each chunk: how the stream is chunked never changes the events.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bounds the bytes buffered for one line or one event's data.
MAX_EVENT_SIZE = 8 << 20

_BOM = "\ufeff"


class EventTooLargeError(ValueError):
    """A line or an event's data exceeds the parser's bound."""


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event."""

    name: str  # the event type; "message" when the event had no event field
    id: str  # the stream's last event ID as of this event
    data: str  # the data lines joined by LF


class SSEParser:
    """Parses one event stream. Not thread-safe; one instance per stream."""

    def __init__(self, max_size: int = MAX_EVENT_SIZE) -> None:
        self._max = max_size
        self._pending = b""  # bytes of an unfinished line (possibly a split UTF-8 sequence)
        self._started = False  # the first line (which may carry a BOM) was read
        self._skip_lf = False  # the last line ended with CR: an LF right after it belongs to it
        self._data: list[str] = []
        self._data_len = 0
        self._has_data = False
        self._name = ""
        self._last_id = ""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consumes ``chunk`` and returns the events it completed, in order.
        Raises :class:`EventTooLargeError` past the bound (the parser is then
        unusable)."""
        out: list[SSEEvent] = []
        buf = self._pending + chunk
        start = 0
        n = len(buf)
        while start < n:
            if self._skip_lf:
                self._skip_lf = False
                if buf[start] == 0x0A:
                    start += 1
                    continue
            cr = buf.find(b"\r", start)
            lf = buf.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            if cr < 0 or (0 <= lf < cr):
                end, nxt = lf, lf + 1
            else:
                end, nxt = cr, cr + 1
                self._skip_lf = True
            self._line(buf[start:end], out)
            start = nxt
        self._pending = buf[start:]
        if len(self._pending) > self._max:
            raise EventTooLargeError("muster: event-stream event too large")
        return out

    def _line(self, raw: bytes, out: list[SSEEvent]) -> None:
        if len(raw) > self._max:
            raise EventTooLargeError("muster: event-stream event too large")
        line = raw.decode("utf-8", errors="replace")
        if not self._started:
            self._started = True
            if line.startswith(_BOM):
                line = line[1:]
        if not line:
            self._dispatch(out)
            return
        if line[0] == ":":
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_len += len(value) + 1
            if self._data_len > self._max:
                raise EventTooLargeError("muster: event-stream event too large")
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._name = value
        elif name == "id" and "\x00" not in value:
            self._last_id = value

    def _dispatch(self, out: list[SSEEvent]) -> None:
        if self._has_data:
            out.append(SSEEvent(name=self._name or "message", id=self._last_id, data="\n".join(self._data)))
        self._data, self._data_len, self._has_data, self._name = [], 0, False, ""
