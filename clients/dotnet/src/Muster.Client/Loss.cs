using System;
using System.Collections.Generic;
using System.Net.Http;

namespace Muster.Client
{
    // Prompt loss. A session is lost the moment the client learns that it ended, not at
    // its next keepalive (docs/client-operations.md, "Prompt loss"):
    //   - any answer or stream from the broker that holds the session (the host that last
    //     answered one of the session's own requests with success: its creator, or the
    //     broker a planned move took the family to) carries another epoch (Muster-Epoch)
    //     than that success: that broker restarted, or the family came back to it as a
    //     new lifetime, and its sessions are gone;
    //   - that broker answers family_unavailable: it stopped serving the family, and its
    //     sessions with it;
    //   - the broker answers session_not_found to a request of the session.
    // A connection error alone proves nothing: the session's local deadline decides then.
    // Every rule is applied here; the rest of the SDK only reports what it saw. A success
    // of one of the session's own requests (keepalive, acquire, extend, release, batch,
    // delete: CallAsync with session) records its broker and epoch (Session.AnsweredBy)
    // before that same answer is judged, so a success from the creator under a new epoch
    // (the family moved away and back) ends nothing (the Go SDK's Session.call).

    public sealed partial class MusterClient
    {
        private readonly HashSet<Session> sessions = new HashSet<Session>(); // live sessions (under lock(this))

        /// <summary>Conformance tests only: sessions are lost at their keepalive only (a new
        /// epoch, family_unavailable or session_not_found to another request end nothing
        /// at once).</summary>
        internal bool LateLoss { get; set; }

        /// <summary>Conformance tests only: a session's broker stays the one that created it
        /// (Session.AnsweredBy records nothing).</summary>
        internal bool CreatorLoss { get; set; }

        /// <summary>The host (host:port) that answered resp: the owner a wrong_broker
        /// answer was followed to, or the base URL's; "" when unknown.</summary>
        internal static string AnsweredBy(HttpResponseMessage resp)
        {
            var req = resp == null ? null : resp.RequestMessage;
            return req == null || req.RequestUri == null ? "" : req.RequestUri.Authority;
        }

        /// <summary>Registers s for prompt loss.</summary>
        internal void TrackSession(Session s)
        {
            lock (this) sessions.Add(s);
        }

        /// <summary>Forgets s once it ended.</summary>
        internal void UntrackSession(Session s)
        {
            lock (this) sessions.Remove(s);
        }

        /// <summary>The problem of a non-success answer; a family_unavailable from a broker
        /// ends the sessions it holds.</summary>
        internal MusterException Problem(HttpResponseMessage resp, string body)
        {
            var e = ProblemError(resp, body);
            if (e.Code == ErrorCode.FamilyUnavailable) BrokerGone(AnsweredBy(resp), null);
            return e;
        }

        /// <summary>Ends, at once, every session host holds that matches: those whose epoch
        /// differs from epoch (a new lifetime answered), or all of them (epoch null: the
        /// broker stopped serving the family). No lock is held while they end.</summary>
        internal void BrokerGone(string host, string epoch)
        {
            if (string.IsNullOrEmpty(host) || LateLoss) return;
            var gone = new List<Session>();
            lock (this)
            {
                foreach (var s in sessions)
                {
                    if (s.HeldBy(host, epoch)) gone.Add(s);
                }
            }
            foreach (var s in gone)
            {
                s.End(new SessionLostException(epoch == null
                    ? string.Format("its broker {0} no longer serves the family (family_unavailable)", host)
                    : string.Format("its broker {0} answered for another lifetime (epoch {1}, the session's {2})", host, epoch, s.Epoch), null));
            }
        }
    }

    public sealed partial class Session
    {
        /// <summary>Records the broker (host:port) that answered one of the session's own
        /// requests with success, and its epoch: it holds the session now
        /// (docs/client-operations.md, "Planned moves").</summary>
        internal void AnsweredBy(string host, string epoch)
        {
            if (string.IsNullOrEmpty(host) || string.IsNullOrEmpty(epoch) || c.CreatorLoss) return;
            lock (mu)
            {
                this.host = host;
                this.epoch = epoch;
            }
        }

        /// <summary>Whether host holds the session under another epoch than epoch (null:
        /// under any epoch).</summary>
        internal bool HeldBy(string host, string epoch)
        {
            lock (mu) return this.host == host && (epoch == null || this.epoch != epoch);
        }

        /// <summary>Ends the session at once when e is the broker's session_not_found to one
        /// of its requests.</summary>
        internal void NotFound(Exception e)
        {
            var me = e as MusterException;
            if (me == null || me.Code != ErrorCode.SessionNotFound || c.LateLoss) return;
            End(new SessionLostException("the broker answered session_not_found to one of its requests: " + me.Message, me));
        }
    }
}
