using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>
    /// The README cannot drift: every C# block is compiled as a user would (the DLL out of
    /// the .nupkg in an empty directory outside the repository, the README's own install
    /// lines, C# 7.2) and run against the real broker, unless a "&lt;!-- not-run: why --&gt;"
    /// line stands right before it. A block with a Main is a whole program, run with
    /// MUSTER_ADDR and MUSTER_TOKEN; any other is the body of an async method of a program
    /// whose Main sets its free names (c, s, session, o, ct, route, myShare; Render and
    /// StopWork are stubs) against the broker and prints a last line when the block returned.
    /// </summary>
    [TestFixture]
    public class ReadmeTests
    {
        internal const string Done = "README block returned";

        private const string Wrapper = @"using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Muster.Client;

#pragma warning disable 649, 169, 414, 1998
public static class ReadmeSnippet
{
    static MusterClient c;
    static Session s, session;
    static InventoryObserver o;
    static CancellationToken ct;
    static string route;
    static IEnumerable<string> myShare;
    static Task Render(string doc, long fencingToken, CancellationToken t) { return Task.CompletedTask; }
    static void StopWork(Exception e) { }

    public static void Main()
    {
        var area = ""lease://acme/readme-"" + Guid.NewGuid().ToString(""N"").Substring(0, 8);
        using (c = new MusterClient(Environment.GetEnvironmentVariable(""MUSTER_ADDR""),
            new MusterClientOptions { Token = Environment.GetEnvironmentVariable(""MUSTER_TOKEN"") }))
        using (s = session = c.CreateSessionAsync(""readme"", TimeSpan.FromSeconds(30)).GetAwaiter().GetResult())
        using (o = c.Observe(area + ""/*""))
        {
            route = area + ""/r"";
            myShare = new[] { area + ""/a"", area + ""/b"", area + ""/c"" };
            o.ReadyAsync().GetAwaiter().GetResult();
            Run().GetAwaiter().GetResult();
        }
        Console.WriteLine(""" + Done + @""");
    }

    static async Task Run()
    {
";

        private static string Readme()
        {
            return File.ReadAllText(Path.Combine(Harness.RepoRoot(), "clients", "dotnet", "README.md"));
        }

        private static string Nupkg()
        {
            var build = Path.GetDirectoryName(typeof(MusterClient).Assembly.Location);
            var v = typeof(MusterClient).Assembly.GetName().Version;
            return Path.Combine(build, string.Format("Muster.Client.{0}.{1}.{2}.nupkg", v.Major, v.Minor, v.Build));
        }

        internal static string Program(ReadmeBlock b)
        {
            return b.IsProgram ? b.Code : Wrapper + b.Code + "    }\n}\n";
        }

        [Test]
        public void ParsesFencesAndMarkers()
        {
            var blocks = ReadmeBlock.Parse("text\n```cs\na\n```\n<!-- not-run: forever -->\n```csharp\nb\n```\n```sh\nc\n```\n");
            CollectionAssert.AreEqual(new[] { "cs", "csharp", "sh" }, blocks.Select(b => b.Lang).ToList());
            CollectionAssert.AreEqual(new[] { true, true, false }, blocks.Select(b => b.IsCSharp).ToList());
            CollectionAssert.AreEqual(new[] { null, "forever", null }, blocks.Select(b => b.NotRun).ToList());
            Assert.AreEqual("b\n", blocks[1].Code);
            Assert.AreEqual(6, blocks[1].Line);
            Assert.Throws<InvalidDataException>(() => ReadmeBlock.Parse("```csharp\nnever closed\n"));
        }

        [Test, Category("Broker")]
        public void EveryCSharpBlockCompilesAndRuns()
        {
            var blocks = ReadmeBlock.Parse(Readme());
            var cs = blocks.Where(b => b.IsCSharp).ToList();
            Assert.GreaterOrEqual(cs.Count, 5, "the README's C# blocks");
            Assert.IsTrue(cs[0].IsProgram, "the README's first C# block is a whole program");
            foreach (var b in cs.Where(b => b.NotRun != null))
                Assert.IsNotEmpty(b.NotRun, "README line " + b.Line + ": say why the block cannot run");
            var install = blocks.Single(b => b.Lang == "sh").Code;

            var h = SharedHarness.Get();
            var env = new Dictionary<string, string> { { "MUSTER_ADDR", h.Broker }, { "MUSTER_TOKEN", h.Tokens["a"] } };
            var failures = new List<string>();
            using (var user = new UserDir(Nupkg(), install))
            {
                CollectionAssert.AreEquivalent(new[] { "Muster.Client.dll", "Newtonsoft.Json.dll" },
                    Directory.GetFiles(user.Dir).Select(Path.GetFileName).ToList(), "the user's directory");
                foreach (var b in cs)
                {
                    var r = user.Build(Program(b), b.NotRun == null ? env : null);
                    var why = r.Code != 0 ? "exit code " + r.Code : b.NotRun == null ? Missing(b, r.Output) : null;
                    if (why != null) failures.Add(string.Format("README line {0}: {1}:\n{2}\n{3}", b.Line, why, r.Output, b.Code));
                }
            }
            CollectionAssert.IsEmpty(failures);
        }

        /// <summary>What the run of a block should have printed and did not, or null.</summary>
        private static string Missing(ReadmeBlock b, string output)
        {
            var want = b.IsProgram
                ? new[] { @"rendering doc-123 under fencing token [1-9][0-9]*\n", @"held now: [0-9]+\n" }
                : new[] { Regex.Escape(Done) + @"\n$" };
            var missing = want.Where(w => !Regex.IsMatch(output.Replace("\r\n", "\n"), w)).ToList();
            return missing.Count == 0 ? null : "no output matching " + string.Join(", ", missing);
        }

        /// <summary>The check above can fail: a block that throws, or does not compile, is
        /// reported.</summary>
        [Test, Category("Broker")]
        public void ABrokenBlockFails()
        {
            var install = ReadmeBlock.Parse(Readme()).Single(b => b.Lang == "sh").Code;
            var h = SharedHarness.Get();
            var env = new Dictionary<string, string> { { "MUSTER_ADDR", h.Broker }, { "MUSTER_TOKEN", h.Tokens["a"] } };
            using (var user = new UserDir(Nupkg(), install))
            {
                var throws = new ReadmeBlock { Lang = "csharp", Code = "await s.AcquireAsync(\"lease://acme/bad route\", TimeSpan.FromSeconds(1));\n" };
                var r = user.Build(Program(throws), env);
                Assert.AreNotEqual(0, r.Code, r.Output);
                StringAssert.Contains("MusterException", r.Output);
                StringAssert.DoesNotContain(Done, r.Output);

                var csharp8 = new ReadmeBlock { Lang = "cs", Code = "await foreach (var it in c.List(\"lease://acme/x/*\")) { }\n" };
                Assert.AreNotEqual(0, user.Build(Program(csharp8), null).Code, "mcs took C# 8");
            }
        }
    }
}
