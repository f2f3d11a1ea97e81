using System.Runtime.CompilerServices;

[assembly: InternalsVisibleTo("Muster.Client.Tests")]
