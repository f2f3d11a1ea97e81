//! Doc tests only (`cfg(doctest)`): the README's code blocks, and the
//! misuses the API refuses at compile time.

/// Every Rust block of the README compiles, and runs when it is a program.
/// The five-minutes example alone is `no_run`: it needs a broker, and
/// `package-test.sh` runs it against one (built in a fresh project from the
/// packaged crate with exactly the README's dependency block), as
/// `tests/broker.rs` runs its copy `examples/five_minutes.rs`. The other
/// blocks define functions (of a `Client`, a `Session`), which compile here
/// and are called by nothing.
#[doc = include_str!("../README.md")]
pub struct Readme;

/// Dropping the result of a builder method is an error under
/// `deny(unused_must_use)` (a warning by default): it changed nothing.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// let opts = muster_client::ObserveOptions::default();
/// opts.page_size(5);
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// let b = muster_client::Client::builder("http://127.0.0.1:7420");
/// b.token("secret");
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// muster_client::AcquireOptions::default().wait(std::time::Duration::from_secs(1));
/// ```
///
/// The same with the result used compiles:
///
/// ```
/// #![deny(unused_must_use)]
/// let opts = muster_client::ObserveOptions::default().page_size(5);
/// let _b = muster_client::Client::builder("http://127.0.0.1:7420").token("secret");
/// let _a = muster_client::AcquireOptions::default().wait(std::time::Duration::from_secs(1));
/// # let _ = opts;
/// ```
pub struct MustUse;

/// A caller cannot end a session or a lease through its signals.
///
/// ```compile_fail,E0599
/// # async fn demo(s: muster_client::Session, l: muster_client::Lease) {
/// s.ended().cancel();
/// # }
/// ```
///
/// ```compile_fail,E0599
/// # async fn demo(l: muster_client::Lease) {
/// l.lost().cancel();
/// # }
/// ```
///
/// Waiting on a temporary signal compiles (it was E0716 while the signals
/// were the SDK's own tokens):
///
/// ```no_run
/// # async fn demo(s: muster_client::Session, l: muster_client::Lease) {
/// tokio::select! {
///     _ = l.lost().cancelled() => {}
///     _ = s.ended() => {}
/// }
/// let mine = l.lost().child_token();
/// mine.cancel(); // cancels the child only
/// assert!(!l.lost().is_cancelled() || l.error().is_some());
/// # }
/// ```
pub struct Signals;

/// The wire types are private; the ones in the API are re-exported. (That
/// `Faults` is not public without the `test-util` feature is checked by
/// `tests/readme.rs`: doc tests see the crate with its tests' features.)
///
/// ```compile_fail,E0603
/// use muster_client::wire::LeaseGrant;
/// ```
///
/// ```
/// use muster_client::{BatchOpKind, ChangeKind, Item, LeaseStatus, Spec};
/// ```
pub struct PrivateSurface;
