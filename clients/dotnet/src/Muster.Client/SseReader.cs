using System;
using System.IO;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Muster.Client
{
    /// <summary>One dispatched Server-Sent Event.</summary>
    internal sealed class SseEvent
    {
        /// <summary>The event type; "message" when the event had no event field.</summary>
        public string Name;
        /// <summary>The stream's last event ID as of this event.</summary>
        public string Id;
        /// <summary>The data lines joined by LF.</summary>
        public string Data;
    }

    /// <summary>The stream has an event larger than the reader's bound.</summary>
    internal sealed class SseTooLargeException : IOException
    {
        public SseTooLargeException() : base("muster: event-stream event too large") { }
    }

    /// <summary>
    /// Reads an event stream by the WHATWG "event stream interpretation" rules: a
    /// leading byte-order mark is dropped; lines end with CR LF, LF or CR; a line
    /// starting with a colon is a comment; "field: value" loses one space after the
    /// colon, a line without a colon is a field with an empty value; data lines are
    /// joined with LF; a blank line dispatches the event unless it had no data
    /// field; unknown fields are ignored, so is retry (the observer has its own
    /// backoff); an id containing NUL is ignored; an event not ended by a blank line
    /// before the end of the stream is discarded.
    ///
    /// It never waits for more bytes than the line it is reading, so an event is
    /// returned as soon as its blank line arrives. Lines are decoded as UTF-8.
    /// Not safe for concurrent use.
    /// </summary>
    internal sealed class SseReader
    {
        /// <summary>Bounds the bytes buffered for one event (a marker with a full first page is well below).</summary>
        internal const int MaxEventSize = 8 << 20;

        private readonly Stream s;
        private readonly int max;
        private readonly byte[] buf = new byte[32 << 10];
        private int pos, end;
        private bool started, skipLF, eof;
        private readonly MemoryStream line = new MemoryStream();
        private readonly StringBuilder data = new StringBuilder();
        private bool hasData;
        private string name = "";
        private string lastId = "";

        internal SseReader(Stream s, int max = MaxEventSize)
        {
            this.s = s;
            this.max = max;
        }

        /// <summary>The next event; null at the end of the stream (a partial event is
        /// discarded). Throws SseTooLargeException, or what the stream throws.</summary>
        internal async Task<SseEvent> NextAsync(CancellationToken ct)
        {
            while (true)
            {
                var l = await ReadLineAsync(ct).ConfigureAwait(false);
                if (l == null) return null;
                if (l.Length == 0)
                {
                    var ev = Dispatch();
                    if (ev != null) return ev;
                    continue;
                }
                Field(l);
            }
        }

        private async Task<string> ReadLineAsync(CancellationToken ct)
        {
            line.SetLength(0);
            while (true)
            {
                if (pos == end)
                {
                    if (eof) return null;
                    end = await s.ReadAsync(buf, 0, buf.Length, ct).ConfigureAwait(false);
                    pos = 0;
                    if (end <= 0)
                    {
                        end = 0;
                        eof = true;
                        return null;
                    }
                }
                byte b = buf[pos++];
                if (skipLF)
                {
                    skipLF = false;
                    if (b == (byte)'\n') continue;
                }
                if (b == (byte)'\n') return Decode();
                if (b == (byte)'\r')
                {
                    skipLF = true;
                    return Decode();
                }
                if (line.Length >= max) throw new SseTooLargeException();
                line.WriteByte(b);
            }
        }

        private string Decode()
        {
            var bytes = line.GetBuffer();
            int n = (int)line.Length, off = 0;
            if (!started)
            {
                started = true;
                if (n >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF) off = 3;
            }
            return Encoding.UTF8.GetString(bytes, off, n - off);
        }

        private void Field(string l)
        {
            if (l[0] == ':') return;
            string field = l, value = "";
            int colon = l.IndexOf(':');
            if (colon >= 0)
            {
                field = l.Substring(0, colon);
                value = l.Substring(colon + 1);
                if (value.Length > 0 && value[0] == ' ') value = value.Substring(1);
            }
            switch (field)
            {
                case "data":
                    if (data.Length + value.Length + 1 > max) throw new SseTooLargeException();
                    data.Append(value).Append('\n');
                    hasData = true;
                    break;
                case "event":
                    name = value;
                    break;
                case "id":
                    if (value.IndexOf('\0') < 0) lastId = value;
                    break;
            }
        }

        private SseEvent Dispatch()
        {
            SseEvent ev = null;
            if (hasData)
            {
                ev = new SseEvent { Name = name == "" ? "message" : name, Id = lastId, Data = data.ToString(0, data.Length - 1) };
            }
            data.Clear();
            hasData = false;
            name = "";
            return ev;
        }
    }
}
