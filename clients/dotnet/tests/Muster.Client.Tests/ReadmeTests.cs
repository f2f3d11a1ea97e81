using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Text;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>
    /// Every ```csharp block of the SDK's README compiles with Mono's mcs, as build.sh
    /// compiles the SDK (C# 7.2, the runtime profile). A block with a Main is a whole
    /// program; any other is the body of an async method whose free names (c, s, session,
    /// o, ct, route, myShare, Render, StopWork) are fields of the class around it. Blocks
    /// marked ```cs hold C# 8 and are not compiled here.
    /// </summary>
    [TestFixture]
    public class ReadmeTests
    {
        private const string Preamble = @"using System;
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

    static async Task Run()
    {
";

        internal static List<string> Blocks(string readme)
        {
            var blocks = new List<string>();
            StringBuilder cur = null;
            foreach (var line in readme.Replace("\r\n", "\n").Split('\n'))
            {
                if (cur == null)
                {
                    if (line.Trim() == "```csharp") cur = new StringBuilder();
                }
                else if (line.Trim() == "```")
                {
                    blocks.Add(cur.ToString());
                    cur = null;
                }
                else
                {
                    cur.Append(line).Append('\n');
                }
            }
            Assert.IsNull(cur, "an unterminated block");
            return blocks;
        }

        [Test]
        public void EveryCSharpBlockCompiles()
        {
            var readme = File.ReadAllText(Path.Combine(Harness.RepoRoot(), "clients", "dotnet", "README.md"));
            var blocks = Blocks(readme);
            Assert.GreaterOrEqual(blocks.Count, 4, "the README's C# blocks");
            var dir = Path.Combine(Path.GetTempPath(), "muster-readme-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(dir);
            var here = Path.GetDirectoryName(typeof(MusterClient).Assembly.Location);
            var failures = new List<string>();
            try
            {
                for (int i = 0; i < blocks.Count; i++)
                {
                    var b = blocks[i];
                    var src = b.Contains("static void Main") ? b : Preamble + b + "    }\n}\n";
                    var file = Path.Combine(dir, "block" + i + ".cs");
                    File.WriteAllText(file, src);
                    const string lib = "/usr/lib/mono/4.5";
                    var args = string.Join(" ", new[]
                    {
                        "-nologo", "-langversion:7.2", "-target:library", "-nostdlib", "-r:" + lib + "/mscorlib.dll", "-lib:" + lib, "-lib:" + lib + "/Facades",
                        "-r:System.dll", "-r:System.Core.dll", "-r:System.Net.Http.dll",
                        "-r:\"" + Path.Combine(here, "Muster.Client.dll") + "\"", "-r:\"" + Path.Combine(here, "Newtonsoft.Json.dll") + "\"",
                        "-out:\"" + Path.Combine(dir, "block" + i + ".dll") + "\"", "\"" + file + "\"",
                    });
                    var psi = new ProcessStartInfo("mcs", args) { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
                    using (var p = Process.Start(psi))
                    {
                        var output = p.StandardOutput.ReadToEnd() + p.StandardError.ReadToEnd();
                        p.WaitForExit();
                        if (p.ExitCode != 0) failures.Add("README C# block " + (i + 1) + ":\n" + output + "\n" + b);
                    }
                }
            }
            finally
            {
                try { Directory.Delete(dir, true); } catch (IOException) { }
            }
            CollectionAssert.IsEmpty(failures);
        }
    }
}
