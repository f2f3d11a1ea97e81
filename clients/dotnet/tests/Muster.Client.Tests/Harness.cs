using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Net.Http;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;

namespace Muster.Client.Tests
{
    /// <summary>The harness's refusal to run a scenario it cannot run here (409
    /// scenario_skipped: a placed scenario with MUSTER_TEST_PG=off): the test skips it,
    /// saying why.</summary>
    internal sealed class ScenarioSkippedException : Exception
    {
        internal ScenarioSkippedException(string why) : base(why) { }
    }

    /// <summary>
    /// The shared conformance harness (clients/conformance/run-harness.sh): the real
    /// broker, the gating proxy and the actors. Started as a child with a stdin pipe;
    /// closing its stdin stops everything it started.
    /// </summary>
    internal sealed class Harness : IDisposable
    {
        private readonly Process p;
        private readonly HttpClient http = new HttpClient { Timeout = TimeSpan.FromMinutes(3) };

        internal string Control { get; private set; }
        internal string Proxy { get; private set; }
        internal string Broker { get; private set; }
        internal Dictionary<string, string> Tokens { get; private set; }

        /// <summary>The repository root: MUSTER_REPO, or the first parent of the working
        /// directory holding clients/conformance/run-harness.sh.</summary>
        internal static string RepoRoot()
        {
            var env = Environment.GetEnvironmentVariable("MUSTER_REPO");
            if (!string.IsNullOrEmpty(env)) return env;
            foreach (var start in new[] { Environment.CurrentDirectory, AppDomain.CurrentDomain.BaseDirectory })
            {
                for (var d = new DirectoryInfo(start); d != null; d = d.Parent)
                {
                    if (File.Exists(Path.Combine(d.FullName, "clients/conformance/run-harness.sh"))) return d.FullName;
                }
            }
            throw new InvalidOperationException("cannot find the repository root: set MUSTER_REPO");
        }

        internal static string ScenarioDir() { return Path.Combine(RepoRoot(), "clients/conformance"); }

        internal Harness()
        {
            var psi = new ProcessStartInfo("bash", Path.Combine(RepoRoot(), "clients/conformance/run-harness.sh"))
            {
                UseShellExecute = false,
                RedirectStandardInput = true,
                RedirectStandardOutput = true,
                RedirectStandardError = false,
            };
            p = Process.Start(psi);
            var line = p.StandardOutput.ReadLine();
            if (line == null)
            {
                p.WaitForExit();
                throw new InvalidOperationException("the harness exited before its first line");
            }
            var o = JObject.Parse(line);
            Control = (string)o["control"];
            Proxy = (string)o["proxy"];
            Broker = (string)o["broker"];
            var toks = JObject.Parse(http.GetStringAsync(Control + "/tokens").GetAwaiter().GetResult());
            Tokens = new Dictionary<string, string>();
            foreach (var kv in toks) Tokens[kv.Key] = (string)kv.Value;
        }

        /// <summary>POSTs body; returns null on want, else a description of the answer.</summary>
        internal async Task<string> PostAsync(string path, string body, int want)
        {
            using (var resp = await http.PostAsync(Control + path, new StringContent(body, Encoding.UTF8, "application/json")).ConfigureAwait(false))
            {
                var text = await resp.Content.ReadAsStringAsync().ConfigureAwait(false);
                if ((int)resp.StatusCode == want) return null;
                return string.Format("{0} {1}: {2}", path, (int)resp.StatusCode, Detail(text));
            }
        }

        /// <summary>POST /scenario: null when loaded, else a description of the answer.
        /// Throws ScenarioSkippedException when the harness skips the scenario.</summary>
        internal async Task<string> LoadAsync(string scenario)
        {
            using (var resp = await http.PostAsync(Control + "/scenario", new StringContent(scenario, Encoding.UTF8, "application/json")).ConfigureAwait(false))
            {
                var text = await resp.Content.ReadAsStringAsync().ConfigureAwait(false);
                if ((int)resp.StatusCode == 204) return null;
                if ((int)resp.StatusCode == 409)
                {
                    var o = JObject.Parse(text);
                    if ((string)o["code"] == "scenario_skipped") throw new ScenarioSkippedException((string)o["detail"]);
                }
                return string.Format("/scenario {0}: {1}", (int)resp.StatusCode, Detail(text));
            }
        }

        internal async Task<JObject> GetAsync(string pathAndQuery)
        {
            using (var resp = await http.GetAsync(Control + pathAndQuery).ConfigureAwait(false))
            {
                var text = await resp.Content.ReadAsStringAsync().ConfigureAwait(false);
                if ((int)resp.StatusCode != 200) throw new InvalidOperationException(string.Format("GET {0}: {1}: {2}", pathAndQuery, (int)resp.StatusCode, Detail(text)));
                return JObject.Parse(text);
            }
        }

        private static string Detail(string text)
        {
            try
            {
                var o = JObject.Parse(text);
                return (string)o["code"] + ": " + (string)o["detail"];
            }
            catch (Exception)
            {
                return text;
            }
        }

        public void Dispose()
        {
            try { p.StandardInput.Close(); } catch (Exception) { }
            if (!p.WaitForExit(30000))
            {
                try { p.Kill(); } catch (Exception) { }
            }
            http.Dispose();
        }
    }
}
