using System;
using System.Collections.Generic;
using System.IO;
using System.IO.Compression;
using System.Linq;
using System.Reflection;
using System.Xml.Linq;
using NUnit.Framework;

namespace Muster.Client.Tests
{
    /// <summary>
    /// The package build.sh writes, read back: the .nupkg's layout (what dotnet pack
    /// writes: OPC parts, nuspec, lib/netstandard2.1, readme), its nuspec against
    /// Muster.Client.csproj (the one place the metadata lives), and the version the DLL
    /// carries.
    /// </summary>
    [TestFixture]
    public class PackageTests
    {
        private static readonly XNamespace Ns = "http://schemas.microsoft.com/packaging/2013/05/nuspec.xsd";

        private static string Dotnet(params string[] parts)
        {
            return Path.Combine(new[] { Harness.RepoRoot(), "clients", "dotnet" }.Concat(parts).ToArray());
        }

        private static string Prop(XDocument csproj, string name)
        {
            var e = csproj.Root.Elements("PropertyGroup").Elements(name).FirstOrDefault();
            Assert.IsNotNull(e, "Muster.Client.csproj has no <" + name + ">");
            return e.Value.Trim();
        }

        private static byte[] Read(ZipArchive zip, string entry)
        {
            var e = zip.GetEntry(entry);
            Assert.IsNotNull(e, "the package has no " + entry);
            using (var s = e.Open())
            using (var ms = new MemoryStream())
            {
                s.CopyTo(ms);
                return ms.ToArray();
            }
        }

        private static XDocument Xml(ZipArchive zip, string entry)
        {
            using (var ms = new MemoryStream(Read(zip, entry))) return XDocument.Load(ms);
        }

        [Test]
        public void TheNupkgSaysWhatTheCsprojSays()
        {
            var csproj = XDocument.Load(Dotnet("src", "Muster.Client", "Muster.Client.csproj"));
            var id = Prop(csproj, "PackageId");
            var version = Prop(csproj, "Version");
            var build = Path.GetDirectoryName(typeof(MusterClient).Assembly.Location);
            var path = Path.Combine(build, id + "." + version + ".nupkg");
            Assert.IsTrue(File.Exists(path), "no " + path);
            using (var zip = ZipFile.OpenRead(path))
            {
                var dll = "lib/netstandard2.1/Muster.Client.dll";
                var names = zip.Entries.Select(e => e.FullName).ToList();
                var core = names.SingleOrDefault(n => n.StartsWith("package/services/metadata/core-properties/") && n.EndsWith(".psmdcp"));
                Assert.IsNotNull(core, "core properties");
                CollectionAssert.AreEquivalent(new[]
                {
                    "[Content_Types].xml", "_rels/.rels", core, id + ".nuspec", dll, "lib/netstandard2.1/Muster.Client.xml", "README.md",
                }, names);

                var m = Xml(zip, id + ".nuspec").Root.Element(Ns + "metadata");
                Assert.IsNotNull(m, "nuspec <metadata> in the 2013/05 namespace");
                Func<string, string> meta = n => (string)m.Element(Ns + n);
                Assert.AreEqual(id, meta("id"));
                Assert.AreEqual(version, meta("version"));
                Assert.AreEqual(Prop(csproj, "Authors"), meta("authors"));
                Assert.AreEqual(Prop(csproj, "Description"), meta("description"));
                Assert.AreEqual(Prop(csproj, "PackageProjectUrl"), meta("projectUrl"));
                var license = m.Element(Ns + "license");
                Assert.AreEqual("expression", (string)license.Attribute("type"));
                Assert.AreEqual(Prop(csproj, "PackageLicenseExpression"), license.Value);
                var repo = m.Element(Ns + "repository");
                Assert.AreEqual(Prop(csproj, "RepositoryUrl"), (string)repo.Attribute("url"));
                Assert.AreEqual(Prop(csproj, "PackageReadmeFile"), meta("readme"));
                CollectionAssert.AreEqual(File.ReadAllBytes(Dotnet("README.md")), Read(zip, meta("readme")), "the packed readme");

                var group = m.Element(Ns + "dependencies").Elements(Ns + "group").Single();
                Assert.AreEqual(".NETStandard2.1", (string)group.Attribute("targetFramework"));
                var newtonsoft = csproj.Root.Descendants("PackageReference").Single(r => (string)r.Attribute("Include") == "Newtonsoft.Json");
                var deps = group.Elements(Ns + "dependency").ToDictionary(d => (string)d.Attribute("id"), d => (string)d.Attribute("version"));
                CollectionAssert.AreEquivalent(new Dictionary<string, string> { { "Newtonsoft.Json", (string)newtonsoft.Attribute("Version") } }, deps);

                // Every part has a content type, and the relationships point at parts.
                XNamespace t = "http://schemas.openxmlformats.org/package/2006/content-types";
                var types = Xml(zip, "[Content_Types].xml").Root.Elements(t + "Default").Select(d => (string)d.Attribute("Extension")).ToList();
                foreach (var n in names.Where(n => n != "[Content_Types].xml"))
                    CollectionAssert.Contains(types, Path.GetExtension(n).TrimStart('.'), "content type of " + n);
                XNamespace rel = "http://schemas.openxmlformats.org/package/2006/relationships";
                var targets = Xml(zip, "_rels/.rels").Root.Elements(rel + "Relationship").Select(x => ((string)x.Attribute("Target")).TrimStart('/')).ToList();
                CollectionAssert.AreEquivalent(new[] { id + ".nuspec", core }, targets);

                // The packed DLL is the one built, and carries the version.
                CollectionAssert.AreEqual(File.ReadAllBytes(typeof(MusterClient).Assembly.Location), Read(zip, dll), "the packed DLL");
            }
        }

        [Test]
        public void TheDllCarriesTheVersion()
        {
            var csproj = XDocument.Load(Dotnet("src", "Muster.Client", "Muster.Client.csproj"));
            var version = Prop(csproj, "Version");
            var asm = typeof(MusterClient).Assembly;
            Assert.AreEqual(new Version(version.Split('-', '+')[0] + ".0"), asm.GetName().Version);
            Assert.AreEqual(version, ((AssemblyInformationalVersionAttribute)Attribute.GetCustomAttribute(asm, typeof(AssemblyInformationalVersionAttribute))).InformationalVersion);
            Assert.AreEqual(asm.GetName().Version.ToString(), ((AssemblyFileVersionAttribute)Attribute.GetCustomAttribute(asm, typeof(AssemblyFileVersionAttribute))).Version);
            Assert.AreEqual(Prop(csproj, "Authors"), ((AssemblyCompanyAttribute)Attribute.GetCustomAttribute(asm, typeof(AssemblyCompanyAttribute))).Company);
            // The README's install lines name this version's package.
            StringAssert.Contains("Muster.Client." + version + ".nupkg", File.ReadAllText(Dotnet("README.md")));
        }
    }
}
