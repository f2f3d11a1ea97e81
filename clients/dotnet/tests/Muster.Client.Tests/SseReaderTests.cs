using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>A stream that answers each read with at most the next chunk.</summary>
    internal sealed class ChunkedStream : Stream
    {
        private readonly Queue<byte[]> chunks;
        internal ChunkedStream(IEnumerable<byte[]> chunks) { this.chunks = new Queue<byte[]>(chunks); }
        private byte[] cur = new byte[0];
        private int pos;

        public override int Read(byte[] buffer, int offset, int count)
        {
            while (pos == cur.Length)
            {
                if (chunks.Count == 0) return 0;
                cur = chunks.Dequeue();
                pos = 0;
            }
            int n = Math.Min(count, cur.Length - pos);
            Array.Copy(cur, pos, buffer, offset, n);
            pos += n;
            return n;
        }

        public override bool CanRead { get { return true; } }
        public override bool CanSeek { get { return false; } }
        public override bool CanWrite { get { return false; } }
        public override long Length { get { throw new NotSupportedException(); } }
        public override long Position { get { throw new NotSupportedException(); } set { throw new NotSupportedException(); } }
        public override void Flush() { }
        public override long Seek(long o, SeekOrigin s) { throw new NotSupportedException(); }
        public override void SetLength(long v) { throw new NotSupportedException(); }
        public override void Write(byte[] b, int o, int c) { throw new NotSupportedException(); }
    }

    [TestFixture]
    public class SseReaderTests
    {
        internal static List<string> ReadAll(IEnumerable<byte[]> chunks, int max = SseReader.MaxEventSize)
        {
            var rd = new SseReader(new ChunkedStream(chunks), max);
            var got = new List<string>();
            SseEvent ev;
            while ((ev = rd.NextAsync(CancellationToken.None).GetAwaiter().GetResult()) != null)
            {
                got.Add(ev.Name + "|" + ev.Id + "|" + ev.Data);
            }
            return got;
        }

        private static byte[] B(string s) { return Encoding.UTF8.GetBytes(s); }

        // Every line ending, a comment, retry, multi-line data, an id, a field without
        // a colon, an event without data, a BOM, a multi-byte character, and a partial
        // last event that must be discarded.
        private const string Stream1 =
            "\uFEFF: keepalive\r\n" +
            "retry: 3000\n" +
            "event: snapshot\r\n" +
            "data: {\"a\":1}\r\n" +
            "\r\n" +
            "id: 7\r" +
            "event: change\r" +
            "data:line1\r" +
            "data: line2\r" +
            "data\r" +
            "\r" +
            "event: lonely\n" +
            "\n" +
            ":comment only\n" +
            "data:  two spaces é\n" +
            "unknown: x\n" +
            "\n" +
            "id: bad\0id\n" +
            "data: x\n" +
            "\n" +
            "event: partial\n" +
            "data: never dispatched\n";

        private static readonly string[] Want1 =
        {
            "snapshot||{\"a\":1}",
            "change|7|line1\nline2\n",
            "message|7| two spaces é",
            "message|7|x",
        };

        [Test]
        public void OneChunk()
        {
            CollectionAssert.AreEqual(Want1, ReadAll(new[] { B(Stream1) }));
        }

        [Test]
        public void EverySplitIntoTwoChunks()
        {
            var all = B(Stream1);
            for (int i = 0; i <= all.Length; i++)
            {
                var got = ReadAll(new[] { all.Take(i).ToArray(), all.Skip(i).ToArray() });
                CollectionAssert.AreEqual(Want1, got, "split at byte " + i);
            }
        }

        [Test]
        public void EverySplitIntoThreeChunks()
        {
            var all = B(Stream1);
            for (int i = 0; i <= all.Length; i += 3)
            {
                for (int j = i; j <= all.Length; j += 2)
                {
                    var got = ReadAll(new[] { all.Take(i).ToArray(), all.Skip(i).Take(j - i).ToArray(), all.Skip(j).ToArray() });
                    CollectionAssert.AreEqual(Want1, got, "split at bytes " + i + ", " + j);
                }
            }
        }

        [Test]
        public void OneByteAtATime()
        {
            CollectionAssert.AreEqual(Want1, ReadAll(B(Stream1).Select(b => new[] { b })));
        }

        [Test]
        public void CrLfSplitAcrossReadsIsOneLineEnding()
        {
            // "data: a\r" | "\n\r\n": the LF right after a CR belongs to it, even in the next read.
            CollectionAssert.AreEqual(new[] { "message||a" }, ReadAll(new[] { B("data: a\r"), B("\n\r\n") }));
            // Two CRs are two line endings: the event is dispatched by the second.
            CollectionAssert.AreEqual(new[] { "message||a" }, ReadAll(new[] { B("data: a\r"), B("\r") }));
        }

        [Test]
        public void EventReturnedBeforeTheNextBytesArrive()
        {
            // A stream whose second read blocks forever: the first event must come back anyway.
            var gate = new TaskCompletionSource<int>();
            var s = new BlockingAfterFirst(B("event: change\ndata: 1\n\n"), gate.Task);
            var rd = new SseReader(s);
            var t = rd.NextAsync(CancellationToken.None);
            Assert.IsTrue(t.Wait(2000), "the event waited for more bytes");
            Assert.AreEqual("1", t.Result.Data);
            gate.SetResult(0);
        }

        [Test]
        public void TooLargeLineOrEventThrows()
        {
            Assert.Throws<SseTooLargeException>(() => ReadAll(new[] { B("data: " + new string('x', 100) + "\n\n") }, 64));
            Assert.Throws<SseTooLargeException>(() => ReadAll(new[] { B(string.Concat(Enumerable.Repeat("data: 0123456789\n", 10)) + "\n") }, 64));
        }

        [Test]
        public void RandomBytesNeverThrowAnythingElse()
        {
            var rnd = new Random(42);
            var alphabet = B("data: event:id\r\n\n\r:x\0é");
            for (int n = 0; n < 2000; n++)
            {
                var len = rnd.Next(0, 200);
                var bytes = new byte[len];
                for (int i = 0; i < len; i++) bytes[i] = rnd.Next(4) == 0 ? (byte)rnd.Next(256) : alphabet[rnd.Next(alphabet.Length)];
                var whole = ReadAll(new[] { bytes }, 128);
                // The same bytes in random chunks give the same events.
                var chunks = new List<byte[]>();
                for (int i = 0; i < len;)
                {
                    int k = Math.Min(len - i, rnd.Next(1, 8));
                    chunks.Add(bytes.Skip(i).Take(k).ToArray());
                    i += k;
                }
                CollectionAssert.AreEqual(whole, ReadAll(chunks, 128));
            }
        }

        private sealed class BlockingAfterFirst : Stream
        {
            private byte[] first;
            private readonly Task<int> gate;
            internal BlockingAfterFirst(byte[] first, Task<int> gate) { this.first = first; this.gate = gate; }

            public override Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken ct)
            {
                if (first != null)
                {
                    Array.Copy(first, 0, buffer, offset, first.Length);
                    var n = first.Length;
                    first = null;
                    return Task.FromResult(n);
                }
                return gate;
            }

            public override int Read(byte[] buffer, int offset, int count) { return ReadAsync(buffer, offset, count, CancellationToken.None).Result; }
            public override bool CanRead { get { return true; } }
            public override bool CanSeek { get { return false; } }
            public override bool CanWrite { get { return false; } }
            public override long Length { get { throw new NotSupportedException(); } }
            public override long Position { get { throw new NotSupportedException(); } set { throw new NotSupportedException(); } }
            public override void Flush() { }
            public override long Seek(long o, SeekOrigin s) { throw new NotSupportedException(); }
            public override void SetLength(long v) { throw new NotSupportedException(); }
            public override void Write(byte[] b, int o, int c) { throw new NotSupportedException(); }
        }
    }
}
