using System;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Net.Http;
using System.Security.Cryptography.X509Certificates;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>
    /// MusterClientOptions.CaFile against a real broker serving
    /// HTTPS: `muster serve` built from this checkout, on 127.0.0.1, in dev mode with the
    /// tls: section that `go run ./tests/tlsca DIR` writes (a throwaway CA and a server
    /// certificate for 127.0.0.1 and localhost signed by it).
    /// </summary>
    [TestFixture, Category("Broker")]
    public class TlsTests
    {
        private string dir;
        private Broker tls;
        private static int unique;

        /// <summary>One `muster serve`, stopped (killed) by Dispose.</summary>
        private sealed class Broker : IDisposable
        {
            private readonly Process p;
            internal string Url { get; private set; }

            internal Broker(string bin, string config, string dataDir)
            {
                var psi = new ProcessStartInfo(bin, string.Format("serve --addr 127.0.0.1:0 --data-dir \"{0}\" --config \"{1}\"", dataDir, config))
                {
                    UseShellExecute = false,
                    RedirectStandardOutput = true,
                    RedirectStandardError = true,
                };
                p = Process.Start(psi);
                p.ErrorDataReceived += (_, __) => { }; // drain the JSON log
                p.BeginErrorReadLine();
                // "muster is serving on https://127.0.0.1:PORT"
                var line = p.StandardOutput.ReadLine() ?? "";
                var at = line.IndexOf("https://", StringComparison.Ordinal);
                if (at < 0)
                {
                    Dispose();
                    throw new InvalidOperationException("muster serve did not print an https:// URL: " + line);
                }
                Url = line.Substring(at).Trim();
                p.StandardOutput.ReadToEndAsync(); // drain the rest of the banner
            }

            public void Dispose()
            {
                try { if (!p.HasExited) p.Kill(); } catch (Exception) { }
                p.WaitForExit(10000);
                p.Dispose();
            }
        }

        private static void Run(string cwd, string file, string args)
        {
            var psi = new ProcessStartInfo(file, args) { UseShellExecute = false, WorkingDirectory = cwd, RedirectStandardError = true };
            using (var p = Process.Start(psi))
            {
                var err = p.StandardError.ReadToEnd();
                p.WaitForExit();
                if (p.ExitCode != 0) throw new InvalidOperationException(string.Format("{0} {1}: exit {2}: {3}", file, args, p.ExitCode, err));
            }
        }

        private string Path(string name) { return System.IO.Path.Combine(dir, name); }

        [OneTimeSetUp]
        public void Start()
        {
            dir = System.IO.Path.Combine(System.IO.Path.GetTempPath(), "muster-dotnet-tls-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(dir);
            var repo = Harness.RepoRoot();
            Run(repo, "go", string.Format("build -o \"{0}\" ./cmd/muster", Path("muster")));
            Run(repo, "go", string.Format("run ./tests/tlsca \"{0}\"", Path("pki")));
            Run(repo, "go", string.Format("run ./tests/tlsca \"{0}\"", Path("other"))); // another CA, not the broker's
            var tlsYaml = File.ReadAllText(Path("pki/tls.yaml"));
            File.WriteAllText(Path("muster.yaml"), "dev_mode: true\n" + tlsYaml);
            tls = new Broker(Path("muster"), Path("muster.yaml"), Path("data"));

        }

        [OneTimeTearDown]
        public void Stop()
        {
            if (tls != null) tls.Dispose();
            try { Directory.Delete(dir, true); } catch (Exception) { }
        }

        private static string Area() { return "tls" + Interlocked.Increment(ref unique); }

        private MusterClient Client(string url = null, string caFile = "pki/ca.pem")
        {
            return new MusterClient(url ?? tls.Url, new MusterClientOptions { CaFile = caFile == null ? null : Path(caFile) });
        }

        private static async Task SessionLeaseRelease(MusterClient c, string route)
        {
            using (var s = await c.CreateSessionAsync("tls-worker", TimeSpan.FromSeconds(10)))
            {
                var l = await s.AcquireAsync(route, TimeSpan.FromSeconds(5));
                Assert.That(l.FencingToken > 0);
                var st = await c.GetAsync(route);
                Assert.IsTrue(st.Held);
                Assert.AreEqual("tls-worker", st.Item.OwnerId);
                await l.ReleaseAsync();
                Assert.IsFalse((await c.GetAsync(route)).Held);
                await s.CloseAsync();
            }
        }

        private static MusterTransportException Untrusted(MusterClient c)
        {
            try
            {
                c.CreateSessionAsync("tls-worker", TimeSpan.FromSeconds(10)).GetAwaiter().GetResult();
            }
            catch (MusterTransportException e)
            {
                return e;
            }
            Assert.Fail("no MusterTransportException");
            return null;
        }

        [Test]
        public async Task CaFileTrustsTheBrokersCertificate()
        {
            StringAssert.StartsWith("https://127.0.0.1:", tls.Url);
            using (var c = Client())
            {
                await SessionLeaseRelease(c, "lease://default/" + Area() + "/doc-1");
            }
            // The certificate names localhost too: a DNS name is checked as well as an address.
            using (var c = Client(tls.Url.Replace("127.0.0.1", "localhost")))
            {
                await SessionLeaseRelease(c, "lease://default/" + Area() + "/doc-1");
            }
        }

        [Test]
        public void WithoutCaFileTheCertificateIsNotTrusted()
        {
            using (var c = Client(caFile: null))
            {
                var e = Untrusted(c);
                Assert.IsInstanceOf<HttpRequestException>(e.InnerException);
                Assert.AreEqual(RetryAdvice.Backoff, e.Advice);
            }
            // Another CA is no better: only the file's certificates are added.
            using (var c = Client(caFile: "other/ca.pem"))
            {
                Untrusted(c);
            }
        }

        [Test]
        public void TheHostNameIsChecked()
        {
            var trust = CaTrust.Load(Path("pki/ca.pem"));
            var server = new X509Certificate2(File.ReadAllBytes(Path("pki/server.pem")));
            var chainErrors = System.Net.Security.SslPolicyErrors.RemoteCertificateChainErrors;
            Assert.IsTrue(trust.Validate("127.0.0.1", server, null, chainErrors));
            Assert.IsTrue(trust.Validate("localhost", server, null, chainErrors));
            Assert.IsTrue(trust.Validate("[::1]", server, null, chainErrors));
            Assert.IsFalse(trust.Validate("127.0.0.2", server, null, chainErrors), "an address the certificate does not name");
            Assert.IsFalse(trust.Validate("example.com", server, null, chainErrors), "a name the certificate does not name");
            var other = new X509Certificate2(File.ReadAllBytes(Path("other/server.pem")));
            Assert.IsFalse(trust.Validate("127.0.0.1", other, null, chainErrors), "signed by another CA");
            Assert.IsFalse(trust.Validate("127.0.0.1", null, null, System.Net.Security.SslPolicyErrors.RemoteCertificateNotAvailable));
        }

        [Test]
        public async Task WatchAndObserverOverHttps()
        {
            var area = Area();
            var sel = "lease://default/" + area + "/*";
            using (var c = Client())
            using (var s = await c.CreateSessionAsync("tls-worker", TimeSpan.FromSeconds(10)))
            using (var sub = await c.WatchAsync(sel))
            using (var o = c.Observe(sel))
            {
                var l = await s.AcquireAsync("lease://default/" + area + "/doc-1", TimeSpan.FromSeconds(30));
                using (var cts = new CancellationTokenSource(10000))
                {
                    var a = await sub.ReadAsync(cts.Token);
                    Assert.AreEqual(ChangeKinds.Acquired, a.Kind);
                    Assert.AreEqual("tls-worker", a.Item.OwnerId);
                    await o.ReadyAsync(cts.Token);
                    while (o.View.Items.Count == 0) await Task.Delay(20, cts.Token);
                    Assert.AreEqual("lease://default/" + area + "/doc-1", o.View.Items.Single().Route);
                    await l.ReleaseAsync();
                    var r = await sub.ReadAsync(cts.Token);
                    Assert.AreEqual(ChangeKinds.Released, r.Kind);
                }
                Assert.IsNull(sub.Error);
                Assert.IsNull(o.Error);
            }
        }

        [Test]
        public void OptionErrors()
        {
            var missing = Assert.Throws<FileNotFoundException>(() => new MusterClient(tls.Url, new MusterClientOptions { CaFile = Path("no-such.pem") }));
            StringAssert.Contains("no-such.pem", missing.Message);
            var empty = Assert.Throws<ArgumentException>(() => new MusterClient(tls.Url, new MusterClientOptions { CaFile = Path("pki/tls.yaml") }));
            Assert.AreEqual("muster: CA file " + Path("pki/tls.yaml") + ": no PEM certificate in it", empty.Message);
            Assert.AreEqual(1, CaTrust.Load(Path("pki/ca.pem")).Certificates.Count);
            using (var http = new HttpClient())
            {
                var both = Assert.Throws<ArgumentException>(() => new MusterClient(tls.Url, new MusterClientOptions { CaFile = Path("pki/ca.pem"), HttpClient = http }));
                StringAssert.StartsWith("muster: CaFile configures the client's own HttpClient", both.Message);
            }
        }
    }
}
