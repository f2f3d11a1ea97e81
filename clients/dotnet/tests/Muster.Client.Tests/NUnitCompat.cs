// The tests are written for NUnit 3 (the .NET test project) and also build against
// Debian's NUnit 2.6 (the Mono build defines NUNIT2): NUnit 2.6 names the one-time
// fixture hooks differently.
#if NUNIT2
using NUnit.Framework;

namespace NUnit.Framework
{
    /// <summary>NUnit 3's OneTimeSetUp: TestFixtureSetUp in NUnit 2.6.</summary>
    internal sealed class OneTimeSetUpAttribute : TestFixtureSetUpAttribute { }

    /// <summary>NUnit 3's OneTimeTearDown of a fixture: TestFixtureTearDown in NUnit 2.6.</summary>
    internal sealed class OneTimeTearDownAttribute : TestFixtureTearDownAttribute { }
}
#endif
