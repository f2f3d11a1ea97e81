using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Muster.Client
{
    /// <summary>
    /// A bounded FIFO between one producer and its readers (a small stand-in for
    /// System.Threading.Channels, which .NET Standard 2.0 lacks). Waiting to read
    /// consumes nothing, so a reader may abandon a wait without losing an item.
    /// </summary>
    internal sealed class AsyncQueue<T>
    {
        private readonly object mu = new object();
        private readonly Queue<T> q = new Queue<T>();
        private readonly int capacity;
        private bool completed;
        private TaskCompletionSource<bool> readable, writable;

        internal AsyncQueue(int capacity) { this.capacity = capacity; }

        /// <summary>Waits for room and enqueues item; false once the queue is completed.</summary>
        internal async Task<bool> WriteAsync(T item, CancellationToken ct)
        {
            while (true)
            {
                Task wait;
                lock (mu)
                {
                    if (completed) return false;
                    if (q.Count < capacity)
                    {
                        q.Enqueue(item);
                        Signal(ref readable);
                        return true;
                    }
                    if (writable == null) writable = NewTcs();
                    wait = writable.Task;
                }
                await Tasks.WaitAsync(wait, ct).ConfigureAwait(false);
            }
        }

        internal bool TryRead(out T item)
        {
            lock (mu)
            {
                if (q.Count > 0)
                {
                    item = q.Dequeue();
                    Signal(ref writable);
                    return true;
                }
            }
            item = default(T);
            return false;
        }

        /// <summary>True when an item can be read; false when the queue is completed and empty.</summary>
        internal async Task<bool> WaitToReadAsync(CancellationToken ct)
        {
            while (true)
            {
                Task wait;
                lock (mu)
                {
                    if (q.Count > 0) return true;
                    if (completed) return false;
                    if (readable == null) readable = NewTcs();
                    wait = readable.Task;
                }
                await Tasks.WaitAsync(wait, ct).ConfigureAwait(false);
            }
        }

        /// <summary>No more items will be written; readers drain what is queued.</summary>
        internal void Complete()
        {
            lock (mu)
            {
                completed = true;
                Signal(ref readable);
                Signal(ref writable);
            }
        }

        private static TaskCompletionSource<bool> NewTcs()
        {
            return new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        }

        private static void Signal(ref TaskCompletionSource<bool> tcs)
        {
            if (tcs != null)
            {
                tcs.TrySetResult(true);
                tcs = null;
            }
        }
    }

    internal static class Tasks
    {
        /// <summary>Waits for t or the cancellation of ct (then throws OperationCanceledException).</summary>
        internal static async Task WaitAsync(Task t, CancellationToken ct)
        {
            if (!ct.CanBeCanceled)
            {
                await t.ConfigureAwait(false);
                return;
            }
            var cancelled = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            using (ct.Register(() => cancelled.TrySetResult(true)))
            {
                if (await Task.WhenAny(t, cancelled.Task).ConfigureAwait(false) != t) throw new OperationCanceledException(ct);
            }
            await t.ConfigureAwait(false);
        }

        /// <summary>Lets t run on unobserved (it handles its own failures).</summary>
        internal static void Forget(Task t) { }

        /// <summary>Task.Delay that returns false instead of throwing when ct is cancelled.</summary>
        internal static async Task<bool> SleepAsync(TimeSpan d, CancellationToken ct)
        {
            try
            {
                if (d > TimeSpan.Zero) await Task.Delay(d, ct).ConfigureAwait(false);
                return !ct.IsCancellationRequested;
            }
            catch (OperationCanceledException)
            {
                return false;
            }
        }
    }
}
