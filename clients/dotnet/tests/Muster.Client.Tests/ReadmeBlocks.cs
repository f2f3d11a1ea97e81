using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Text;

namespace Muster.Client.Tests
{
    /// <summary>A fenced code block of a Markdown file.</summary>
    internal sealed class ReadmeBlock
    {
        internal string Lang;
        internal string Code;
        internal int Line;      // of the opening fence, from 1
        internal string NotRun; // the reason after "<!-- not-run:", or null

        internal bool IsCSharp
        {
            get { return Lang == "csharp" || Lang == "cs" || Lang == "c#"; }
        }

        internal bool IsProgram
        {
            get { return Code.Contains("static void Main("); }
        }

        /// <summary>Every fenced block; a line "&lt;!-- not-run: why --&gt;" right before a
        /// fence marks its block.</summary>
        internal static List<ReadmeBlock> Parse(string markdown)
        {
            var blocks = new List<ReadmeBlock>();
            var lines = markdown.Replace("\r\n", "\n").Split('\n');
            ReadmeBlock cur = null;
            var body = new StringBuilder();
            for (int i = 0; i < lines.Length; i++)
            {
                var t = lines[i].Trim();
                if (cur == null)
                {
                    if (!t.StartsWith("```")) continue;
                    cur = new ReadmeBlock { Lang = t.Substring(3).Trim().ToLowerInvariant(), Line = i + 1 };
                    var before = i > 0 ? lines[i - 1].Trim() : "";
                    if (before.StartsWith("<!-- not-run") && before.EndsWith("-->"))
                        cur.NotRun = before.Substring("<!-- not-run".Length, before.Length - "<!-- not-run".Length - 3).Trim(' ', ':');
                    body.Clear();
                }
                else if (t == "```")
                {
                    cur.Code = body.ToString();
                    blocks.Add(cur);
                    cur = null;
                }
                else
                {
                    body.Append(lines[i]).Append('\n');
                }
            }
            if (cur != null) throw new InvalidDataException("the block at line " + cur.Line + " is not closed");
            return blocks;
        }
    }

    /// <summary>
    /// A user's directory outside the repository: the SDK's DLL taken out of the .nupkg
    /// (as the README's Install says, with unzip) and Debian's Newtonsoft.Json next to it,
    /// nothing else. Programs are compiled and run there with the README's own shell lines.
    /// </summary>
    internal sealed class UserDir : IDisposable
    {
        internal const string NewtonsoftDll = "/usr/lib/cli/Newtonsoft.Json-5.0/Newtonsoft.Json.dll";
        internal readonly string Dir;
        private readonly string install;

        /// <param name="installLines">the README's ```sh block: compiles Program.cs into
        /// worker.exe, then its last line runs it</param>
        internal UserDir(string nupkg, string installLines)
        {
            install = installLines;
            Dir = Path.Combine(Path.GetTempPath(), "muster-user-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(Dir);
            var r = Shell("unzip -q -j '" + nupkg + "' lib/netstandard2.1/Muster.Client.dll && cp '" + NewtonsoftDll + "' .",
                null, 60);
            if (r.Code != 0) throw new InvalidOperationException("cannot take the DLL out of the package: " + r.Output);
        }

        /// <summary>The install lines without the last one (mono worker.exe).</summary>
        internal string CompileLines
        {
            get
            {
                var lines = install.TrimEnd('\n').Split('\n');
                if (!lines.Last().StartsWith("mono worker.exe"))
                    throw new InvalidDataException("the install lines do not end with mono worker.exe");
                return string.Join("\n", lines.Take(lines.Length - 1));
            }
        }

        /// <summary>Writes Program.cs, runs the install lines (all of them when env is
        /// given, else those that compile) and returns what they print.</summary>
        internal Result Build(string program, IDictionary<string, string> env)
        {
            File.WriteAllText(Path.Combine(Dir, "Program.cs"), program);
            File.Delete(Path.Combine(Dir, "worker.exe"));
            return Shell(env == null ? CompileLines : install, env, 180);
        }

        internal struct Result
        {
            internal int Code;
            internal string Output;
        }

        private Result Shell(string script, IDictionary<string, string> env, int timeoutSeconds)
        {
            // timeout(1) kills the whole process group (mono included) should a program
            // hang: a guard, never a measure, so the limit is generous.
            var psi = new ProcessStartInfo("timeout", "-k 5 " + timeoutSeconds + " bash -euo pipefail")
            {
                WorkingDirectory = Dir,
                UseShellExecute = false,
                RedirectStandardInput = true,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            psi.EnvironmentVariables.Remove("MUSTER_ADDR");
            psi.EnvironmentVariables.Remove("MUSTER_TOKEN");
            if (env != null)
            {
                foreach (var kv in env) psi.EnvironmentVariables[kv.Key] = kv.Value;
            }
            using (var p = Process.Start(psi))
            {
                var stdout = p.StandardOutput.ReadToEndAsync();
                var stderr = p.StandardError.ReadToEndAsync();
                p.StandardInput.Write(script + "\n");
                p.StandardInput.Close();
                p.WaitForExit();
                var output = stdout.Result + stderr.Result;
                if (p.ExitCode == 124) output = "killed after " + timeoutSeconds + " s\n" + output;
                return new Result { Code = p.ExitCode, Output = output };
            }
        }

        public void Dispose()
        {
            try { Directory.Delete(Dir, true); } catch (IOException) { } catch (UnauthorizedAccessException) { }
        }
    }
}
