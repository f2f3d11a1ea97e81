using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    [TestFixture]
    public class ErrorTests
    {
        // The contract's known codes, in order (openapi.yaml's ErrorCode x-extensible-enum), with the Go SDK's advice.
        private static readonly object[][] Table =
        {
            new object[] { "invalid_route", ErrorCode.InvalidRoute, RetryAdvice.No },
            new object[] { "invalid_selector", ErrorCode.InvalidSelector, RetryAdvice.No },
            new object[] { "invalid_request", ErrorCode.InvalidRequest, RetryAdvice.No },
            new object[] { "unauthenticated", ErrorCode.Unauthenticated, RetryAdvice.No },
            new object[] { "forbidden", ErrorCode.Forbidden, RetryAdvice.No },
            new object[] { "session_not_found", ErrorCode.SessionNotFound, RetryAdvice.Restart },
            new object[] { "lease_held", ErrorCode.LeaseHeld, RetryAdvice.Backoff },
            new object[] { "already_queued", ErrorCode.AlreadyQueued, RetryAdvice.No },
            new object[] { "wait_timeout", ErrorCode.WaitTimeout, RetryAdvice.Backoff },
            new object[] { "queue_full", ErrorCode.QueueFull, RetryAdvice.Backoff },
            new object[] { "not_owner", ErrorCode.NotOwner, RetryAdvice.Restart },
            new object[] { "fenced", ErrorCode.Fenced, RetryAdvice.Restart },
            new object[] { "lease_expired", ErrorCode.LeaseExpired, RetryAdvice.Restart },
            new object[] { "invalid_cursor", ErrorCode.InvalidCursor, RetryAdvice.No },
            new object[] { "cursor_expired", ErrorCode.CursorExpired, RetryAdvice.Restart },
            new object[] { "epoch_changed", ErrorCode.EpochChanged, RetryAdvice.Restart },
            new object[] { "subscription_limit", ErrorCode.SubscriptionLimit, RetryAdvice.No },
            new object[] { "inventory_unavailable", ErrorCode.InventoryUnavailable, RetryAdvice.Backoff },
            new object[] { "invalid_name", ErrorCode.InvalidName, RetryAdvice.No },
            new object[] { "spec_not_found", ErrorCode.SpecNotFound, RetryAdvice.No },
            new object[] { "payload_too_large", ErrorCode.PayloadTooLarge, RetryAdvice.No },
            new object[] { "internal", ErrorCode.Internal, RetryAdvice.Backoff },
            new object[] { "not_found", ErrorCode.NotFound, RetryAdvice.No },
            new object[] { "method_not_allowed", ErrorCode.MethodNotAllowed, RetryAdvice.No },
            new object[] { "not_implemented", ErrorCode.NotImplemented, RetryAdvice.No },
            new object[] { "unavailable", ErrorCode.Unavailable, RetryAdvice.Backoff },
            new object[] { "session_limit", ErrorCode.SessionLimit, RetryAdvice.Backoff },
            new object[] { "spec_limit", ErrorCode.SpecLimit, RetryAdvice.No },
            new object[] { "wrong_broker", ErrorCode.WrongBroker, RetryAdvice.Restart },
            new object[] { "family_unavailable", ErrorCode.FamilyUnavailable, RetryAdvice.Backoff },
        };

        /// <summary>The known codes of openapi.yaml: the x-extensible-enum list of the
        /// ErrorCode schema (an open string, deliberately not an enum).</summary>
        private static List<string> ContractCodes()
        {
            var lines = File.ReadAllLines(Path.Combine(Harness.RepoRoot(), "openapi.yaml"));
            int i = Array.IndexOf(lines, "    ErrorCode:");
            Assert.That(i >= 0, "openapi.yaml has no ErrorCode schema");
            while (i < lines.Length && lines[i].Trim() != "x-extensible-enum:")
            {
                Assert.AreNotEqual("enum:", lines[i].Trim(), "ErrorCode is a closed enum again");
                i++;
            }
            Assert.That(i < lines.Length, "ErrorCode has no x-extensible-enum");
            var codes = new List<string>();
            var item = new Regex(@"^\s+- ([a-z_]+)$");
            for (i++; i < lines.Length; i++)
            {
                var m = item.Match(lines[i]);
                if (!m.Success) break;
                codes.Add(m.Groups[1].Value);
            }
            return codes;
        }

        [Test]
        public void TheSdkKnowsExactlyTheContractsCodesInOrder()
        {
            var contract = ContractCodes();
            Assert.That(contract.Count >= 28, "too few codes read from openapi.yaml: " + contract.Count);
            CollectionAssert.AreEqual(contract, ErrorCodes.All.Select(ErrorCodes.Name).ToList());
            CollectionAssert.AreEqual(contract, Table.Select(r => (string)r[0]).ToList());
        }

        [Test]
        public void ScopeOfALimitIsKept()
        {
            var e = MusterClient.ProblemError(429, "application/problem+json",
                "{\"type\":\"about:blank\",\"title\":\"Too Many Requests\",\"status\":429,\"code\":\"spec_limit\",\"detail\":\"full\",\"scope\":\"root\"}");
            Assert.AreEqual(ErrorCode.SpecLimit, e.Code);
            Assert.AreEqual("root", e.Scope);
            Assert.AreEqual(RetryAdvice.No, e.Advice);
            Assert.IsFalse(e.IsRetryable);
            var f = MusterClient.ProblemError(429, "application/problem+json", "{\"code\":\"session_limit\",\"scope\":\"family\"}");
            Assert.AreEqual("family", f.Scope);
            Assert.AreEqual(RetryAdvice.Backoff, f.Advice);
            // Absent, or not a string: "".
            Assert.AreEqual("", MusterClient.ProblemError(409, "application/problem+json", "{\"code\":\"lease_held\"}").Scope);
            Assert.AreEqual("", MusterClient.ProblemError(429, "application/problem+json", "{\"code\":\"queue_full\",\"scope\":7}").Scope);
            Assert.AreEqual("", MusterClient.ProblemError(503, "text/html", "<html/>").Scope);
            Assert.AreEqual("", new MusterException(ErrorCode.InvalidRoute, "x").Scope);
        }

        [Test]
        public void EveryContractCodeIsTypedWithItsAdvice()
        {
            CollectionAssert.AreEqual(Table.Select(r => (ErrorCode)r[1]).ToList(), ErrorCodes.All.ToList());
            foreach (var r in Table)
            {
                var body = "{\"type\":\"about:blank\",\"title\":\"T\",\"status\":409,\"code\":\"" + r[0] + "\",\"detail\":\"d\"}";
                var e = MusterClient.ProblemError(409, "application/problem+json", body);
                Assert.AreEqual(r[1], e.Code, (string)r[0]);
                Assert.AreEqual(r[0], e.CodeName);
                Assert.AreEqual(r[2], e.Advice, (string)r[0]);
                Assert.AreEqual((RetryAdvice)r[2] == RetryAdvice.Backoff, e.IsRetryable);
                Assert.AreEqual(r[0], ErrorCodes.Name((ErrorCode)r[1]));
                Assert.AreEqual("T", e.Title);
                Assert.AreEqual("d", e.Detail);
                Assert.AreEqual("muster: " + r[0] + ": d", e.Message);
                Assert.AreEqual("", e.Scope);
            }
        }

        [Test]
        public void UnknownCodeKeepsItsStringAndIsAdvisedByStatus()
        {
            var e = MusterClient.ProblemError(503, "application/problem+json; charset=utf-8", "{\"code\":\"brand_new\",\"status\":503}");
            Assert.AreEqual(ErrorCode.Unknown, e.Code);
            Assert.AreEqual("brand_new", e.CodeName);
            Assert.AreEqual(RetryAdvice.Backoff, e.Advice);
            Assert.AreEqual(RetryAdvice.Backoff, MusterClient.ProblemError(429, "application/json", "{\"code\":\"x\"}").Advice);
            Assert.AreEqual(RetryAdvice.No, MusterClient.ProblemError(400, "application/json", "{\"code\":\"x\"}").Advice);
        }

        [Test]
        public void BodiesWithoutAProblemMapByStatusAndNeverThrow()
        {
            Assert.AreEqual(ErrorCode.Unavailable, MusterClient.ProblemError(502, "text/html", "<html>bad gateway</html>").Code);
            Assert.AreEqual(ErrorCode.Unavailable, MusterClient.ProblemError(504, "", "").Code);
            Assert.AreEqual(ErrorCode.NotFound, MusterClient.ProblemError(404, "text/plain", "nope").Code);
            Assert.AreEqual(ErrorCode.Unauthenticated, MusterClient.ProblemError(401, null, null).Code);
            Assert.AreEqual(ErrorCode.Forbidden, MusterClient.ProblemError(403, "application/json", "{}").Code);
            Assert.AreEqual(ErrorCode.PayloadTooLarge, MusterClient.ProblemError(413, "application/json", "[1,2").Code);
            var e = MusterClient.ProblemError(500, "application/problem+json", "{\"code\": 12}");
            Assert.AreEqual(ErrorCode.Internal, e.Code);
            StringAssert.StartsWith("HTTP 500 without a problem body", e.Detail);
            // Fuzz: no body makes the mapping throw.
            var rnd = new Random(7);
            const string alphabet = "{}[]\":,code\\u0 truefalsenull123.e-";
            for (int i = 0; i < 3000; i++)
            {
                var chars = new char[rnd.Next(0, 60)];
                for (int j = 0; j < chars.Length; j++) chars[j] = alphabet[rnd.Next(alphabet.Length)];
                var err = MusterClient.ProblemError(400 + rnd.Next(200), "application/problem+json", new string(chars));
                Assert.IsNotNull(err.CodeName);
            }
        }

        [Test]
        public void AdviceOfSdkExceptions()
        {
            Assert.AreEqual(RetryAdvice.Restart, ErrorCodes.Advice(new LeaseLostException(new MusterException(ErrorCode.Fenced, ""))));
            Assert.AreEqual(RetryAdvice.Restart, ErrorCodes.Advice(new StreamEndedException("overflow", 0)));
            Assert.AreEqual(RetryAdvice.No, ErrorCodes.Advice(new MusterClosedException()));
            Assert.AreEqual(RetryAdvice.No, ErrorCodes.Advice(new OperationCanceledException()));
            Assert.AreEqual(RetryAdvice.No, ErrorCodes.Advice(null));
        }

        /// <summary>The issue's retry loop: a policy on IsRetryable must not retry a
        /// released lease, a lost session or an exception the SDK does not know forever;
        /// transport failures come wrapped and back off.</summary>
        [Test]
        public void AdviceNeverRetriesWhatCannotSucceed()
        {
            Assert.AreEqual(RetryAdvice.No, ErrorCodes.Advice(new LeaseReleasedException()));
            Assert.AreEqual(RetryAdvice.Restart, ErrorCodes.Advice(new SessionLostException("gone", new MusterException(ErrorCode.SessionNotFound, ""))));
            Assert.AreEqual(RetryAdvice.No, ErrorCodes.Advice(new InvalidOperationException("a bug")));
            Assert.AreEqual(RetryAdvice.No, ErrorCodes.Advice(new System.IO.InvalidDataException("a malformed answer")));
            Assert.AreEqual(RetryAdvice.No, ErrorCodes.Advice(new System.Net.Http.HttpRequestException("raw: not from the SDK")));
            var t = new MusterTransportException(new System.Net.Http.HttpRequestException("refused"));
            Assert.AreEqual(RetryAdvice.Backoff, ErrorCodes.Advice(t));
            Assert.IsTrue(t.IsRetryable);
            Assert.IsInstanceOf<System.Net.Http.HttpRequestException>(t.InnerException);
            Assert.AreEqual(RetryAdvice.Backoff, ErrorCodes.Advice(new AggregateException(t)));
            // Every exception of the SDK is a MusterException, with its advice on it.
            var all = new MusterException[]
            {
                t, new LeaseReleasedException(), new LeaseLostException(null), new MusterClosedException(),
                new SessionLostException("x", null), new StreamEndedException("overflow", 1),
            };
            var want = new[] { RetryAdvice.Backoff, RetryAdvice.No, RetryAdvice.Restart, RetryAdvice.No, RetryAdvice.Restart, RetryAdvice.Restart };
            for (int i = 0; i < all.Length; i++)
            {
                Assert.AreEqual(want[i], all[i].Advice, all[i].GetType().Name);
                Assert.AreEqual(want[i] == RetryAdvice.Backoff, all[i].IsRetryable, all[i].GetType().Name);
                Assert.AreEqual(ErrorCode.Unknown, all[i].Code);
                Assert.AreEqual(0, all[i].Status);
                Assert.AreEqual("", all[i].CodeName);
            }
        }

        [Test]
        public void LocalRefusalHasStatusZero()
        {
            var e = new MusterException(ErrorCode.InvalidRoute, "a route is lease://{realm}/{area}/{resource}");
            Assert.AreEqual(0, e.Status);
            Assert.AreEqual("invalid_route", e.CodeName);
            Assert.AreEqual(RetryAdvice.No, e.Advice);
        }
    }
}
