using System;
using System.Collections.Generic;
using System.IO;
using System.Net.Http;
using System.Net.Security;
using System.Reflection;
using System.Security.Cryptography.X509Certificates;

namespace Muster.Client
{
    /// <summary>
    /// MusterClientOptions.CaFile (Go: WithCAFile): the server certificate of an https://
    /// broker is accepted when its chain ends at one of the file's certificates (or at a
    /// root the platform trusts already), with the host name checked as usual. Nothing
    /// else about validation changes, and only the HttpClient the client creates uses it.
    ///
    /// Two ways to build the chain, because Mono's X509Chain cannot: Mono 6's managed
    /// chain builder decodes RSA and DSA keys only (an ECDSA certificate, what
    /// tests/tlsca and most private CAs issue, throws NotSupportedException), and
    /// X509Certificate2.GetECDsaPublicKey is not implemented. On Mono the check is
    /// therefore its TLS provider's own verifier (BoringSSL, "btls", the one that
    /// validates every TLS connection there), reached through Mono.Security's public
    /// Mono.Security.Interface API with the file's certificates as its
    /// MonoTlsSettings.TrustAnchors (added to Mono's trusted roots for this check only)
    /// and the request's host; elsewhere (.NET, .NET Framework) an X509Chain with the
    /// file's certificates in its ExtraStore, accepted only when the chain reaches one of
    /// them.
    /// </summary>
    internal sealed class CaTrust
    {
        private readonly X509Certificate2[] cas;
        private readonly MonoVerifier mono;

        private CaTrust(X509Certificate2[] cas)
        {
            this.cas = cas;
            mono = MonoVerifier.Load(cas);
        }

        /// <summary>Reads the PEM file at path. Throws the IOException of a file that cannot be
        /// read, or ArgumentException when it holds no certificate or a malformed one.</summary>
        internal static CaTrust Load(string path)
        {
            var text = File.ReadAllText(path);
            var certs = new List<X509Certificate2>();
            const string begin = "-----BEGIN CERTIFICATE-----", end = "-----END CERTIFICATE-----";
            for (int at = text.IndexOf(begin, StringComparison.Ordinal); at >= 0; at = text.IndexOf(begin, at, StringComparison.Ordinal))
            {
                var stop = text.IndexOf(end, at, StringComparison.Ordinal);
                if (stop < 0) break;
                var body = text.Substring(at + begin.Length, stop - at - begin.Length);
                at = stop + end.Length;
                try
                {
                    certs.Add(new X509Certificate2(Convert.FromBase64String(body)));
                }
                catch (Exception e) when (e is FormatException || e is System.Security.Cryptography.CryptographicException)
                {
                    throw new ArgumentException(string.Format("muster: CA file {0}: certificate {1}: {2}", path, certs.Count + 1, e.Message), e);
                }
            }
            if (certs.Count == 0) throw new ArgumentException(string.Format("muster: CA file {0}: no PEM certificate in it", path));
            return new CaTrust(certs.ToArray());
        }

        /// <summary>The certificates of the file, in its order.</summary>
        internal IReadOnlyList<X509Certificate2> Certificates { get { return cas; } }

        /// <summary>Installs the check on h (HttpClientHandler.ServerCertificateCustomValidationCallback).</summary>
        internal void Apply(HttpClientHandler h)
        {
            h.ServerCertificateCustomValidationCallback = (req, cert, chain, errors) =>
                Validate(req.RequestUri.IdnHost, cert, chain, errors);
        }

        /// <summary>Whether the server certificate cert (chain: what the platform built from
        /// what the server sent, errors: its verdict with the platform's roots) is trusted
        /// for host. Any exception is a refusal.</summary>
        internal bool Validate(string host, X509Certificate2 cert, X509Chain chain, SslPolicyErrors errors)
        {
            if (cert == null || (errors & SslPolicyErrors.RemoteCertificateNotAvailable) != 0) return false;
            try
            {
                var presented = new List<X509Certificate2> { cert };
                if (chain != null)
                {
                    foreach (var el in chain.ChainElements)
                    {
                        if (!Same(el.Certificate.RawData, cert.RawData)) presented.Add(el.Certificate);
                    }
                }
                if (mono != null) return mono.Verify(host, presented);
                if ((errors & SslPolicyErrors.RemoteCertificateNameMismatch) != 0) return false;
                if (errors == SslPolicyErrors.None) return true;
                return ChainReachesCa(cert, presented);
            }
            catch (Exception)
            {
                return false;
            }
        }

        /// <summary>X509Chain with the file's certificates (and the intermediates the server
        /// sent) as extra certificates: true when the chain reaches one of the file's, with
        /// no other fault up to it (its being no system root aside).</summary>
        private bool ChainReachesCa(X509Certificate2 cert, List<X509Certificate2> presented)
        {
            using (var ch = new X509Chain())
            {
                ch.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck;
                ch.ChainPolicy.VerificationFlags = X509VerificationFlags.AllowUnknownCertificateAuthority;
                foreach (var c in cas) ch.ChainPolicy.ExtraStore.Add(c);
                for (int i = 1; i < presented.Count; i++) ch.ChainPolicy.ExtraStore.Add(presented[i]);
                ch.Build(cert);
                for (int i = 0; i < ch.ChainElements.Count; i++)
                {
                    var el = ch.ChainElements[i];
                    foreach (var st in el.ChainElementStatus)
                    {
                        if ((st.Status & ~(X509ChainStatusFlags.UntrustedRoot | X509ChainStatusFlags.PartialChain)) != 0) return false;
                    }
                    if (i > 0 && IsCa(el.Certificate)) return true;
                }
                return false;
            }
        }

        private bool IsCa(X509Certificate2 c)
        {
            foreach (var ca in cas)
            {
                if (Same(ca.RawData, c.RawData)) return true;
            }
            return false;
        }

        private static bool Same(byte[] a, byte[] b) { return Bytes.Same(a, b); }
    }

    internal static class Bytes
    {
        internal static bool Same(byte[] a, byte[] b)
        {
            if (a == null || b == null || a.Length != b.Length) return false;
            for (int i = 0; i < a.Length; i++)
            {
                if (a[i] != b[i]) return false;
            }
            return true;
        }
    }

    /// <summary>
    /// Mono's own certificate verifier with extra trust anchors, by reflection (no
    /// reference to Mono.Security, so the assembly stays .NET Standard):
    /// Mono.Security.Interface.CertificateValidationHelper.GetValidator(settings) with
    /// settings.TrustAnchors = the CA file's certificates, then
    /// ICertificateValidator.ValidateCertificate(host, false, chain). Its provider (btls on
    /// Mono 6) builds the chain from the presented certificates against Mono's trusted
    /// roots plus the anchors, and checks the host name (DNS names and IP addresses).
    /// Null when the runtime is not Mono or lacks that API.
    /// </summary>
    internal sealed class MonoVerifier
    {
        private readonly object validator;
        private readonly MethodInfo validate;
        private readonly PropertyInfo trusted, userDenied, policyErrors;

        private MonoVerifier(object validator, MethodInfo validate, Type result)
        {
            this.validator = validator;
            this.validate = validate;
            trusted = result.GetProperty("Trusted");
            userDenied = result.GetProperty("UserDenied");
            policyErrors = result.GetProperty("PolicyErrors");
        }

        internal static MonoVerifier Load(X509Certificate2[] anchors)
        {
            if (Type.GetType("Mono.Runtime") == null) return null;
            var settingsType = Type.GetType("Mono.Security.Interface.MonoTlsSettings, Mono.Security");
            var helper = Type.GetType("Mono.Security.Interface.CertificateValidationHelper, Mono.Security");
            var iface = Type.GetType("Mono.Security.Interface.ICertificateValidator, Mono.Security");
            var result = Type.GetType("Mono.Security.Interface.ValidationResult, Mono.Security");
            if (settingsType == null || helper == null || iface == null || result == null) return null;
            // CertificateValidationHelper.SupportsTrustAnchors says false on Mono 6.8 although
            // btls honours TrustAnchors (TlsTests checks both ways: the CA trusted, another CA not), so it is not asked.
            var settings = Activator.CreateInstance(settingsType);
            var coll = new X509CertificateCollection();
            foreach (var a in anchors) coll.Add(a);
            settingsType.GetProperty("TrustAnchors").SetValue(settings, coll);
            // Neither ServicePointManager's callback nor a settings callback takes part.
            var spm = settingsType.GetProperty("UseServicePointManagerCallback");
            if (spm != null) spm.SetValue(settings, (bool?)false);
            var getValidator = helper.GetMethod("GetValidator", new[] { settingsType });
            var validate = iface.GetMethod("ValidateCertificate", new[] { typeof(string), typeof(bool), typeof(X509CertificateCollection) });
            if (getValidator == null || validate == null || result.GetProperty("Trusted") == null || result.GetProperty("PolicyErrors") == null) return null;
            var v = getValidator.Invoke(null, new[] { settings });
            return v == null ? null : new MonoVerifier(v, validate, result);
        }

        /// <summary>Trusted, not denied and no policy error: the chain reaches a trusted root or
        /// an anchor, and the certificate names host.</summary>
        internal bool Verify(string host, List<X509Certificate2> presented)
        {
            var coll = new X509CertificateCollection();
            foreach (var c in presented) coll.Add(c);
            // btls matches the host against DNS names only (an IP address never matches):
            // for an IP address the chain is verified without a host, and the address is
            // looked up in the certificate's IP address names here.
            System.Net.IPAddress ip;
            if (System.Net.IPAddress.TryParse(host.Trim('[', ']'), out ip))
            {
                if (!SubjectAltNames.HasIp(presented[0], ip)) return false;
                host = null;
            }
            var r = validate.Invoke(validator, new object[] { host, false, coll });
            if (r == null) return false;
            return (bool)trusted.GetValue(r) && !(userDenied != null && (bool)userDenied.GetValue(r)) &&
                Convert.ToInt32(policyErrors.GetValue(r)) == 0;
        }
    }

    /// <summary>The iPAddress entries of a certificate's subject alternative names (RFC 5280
    /// 4.2.1.6: GeneralNames, a SEQUENCE whose [7] IMPLICIT OCTET STRING items are 4- or
    /// 16-byte addresses), read from the extension's DER.</summary>
    internal static class SubjectAltNames
    {
        internal static bool HasIp(X509Certificate2 cert, System.Net.IPAddress ip)
        {
            var want = ip.GetAddressBytes();
            foreach (var ext in cert.Extensions)
            {
                if (ext.Oid == null || ext.Oid.Value != "2.5.29.17") continue;
                var d = ext.RawData;
                int at = 0, len;
                if (d.Length < 2 || d[at++] != 0x30 || !Length(d, ref at, out len) || at + len > d.Length) return false;
                int end = at + len;
                while (at < end)
                {
                    byte tag = d[at++];
                    if (!Length(d, ref at, out len) || at + len > end) return false;
                    if (tag == 0x87 && len == want.Length)
                    {
                        bool same = true;
                        for (int i = 0; i < len; i++) same &= d[at + i] == want[i];
                        if (same) return true;
                    }
                    at += len;
                }
            }
            return false;
        }

        /// <summary>A DER length at d[at] (short form, or long form of up to 3 bytes).</summary>
        private static bool Length(byte[] d, ref int at, out int len)
        {
            len = 0;
            if (at >= d.Length) return false;
            int b = d[at++];
            if (b < 0x80) { len = b; return true; }
            int n = b & 0x7f;
            if (n == 0 || n > 3 || at + n > d.Length) return false;
            for (int i = 0; i < n; i++) len = (len << 8) | d[at++];
            return true;
        }
    }
}
