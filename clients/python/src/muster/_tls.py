"""The TLS options of a Client: a private CA (``ca_file``) and a client
certificate for mutual TLS (``client_cert``), as one ``ssl.SSLContext`` for
the client's own ``httpx.AsyncClient`` (docs/operations.md, "TLS")."""

from __future__ import annotations

import os
import ssl

import httpx

#: A path as the standard library takes one.
StrPath = str | os.PathLike[str]


def ssl_context(ca_file: StrPath | None, client_cert: tuple[StrPath, StrPath] | None) -> ssl.SSLContext | None:
    """The context of the TLS options, None when neither is given.

    ``ca_file``: the CAs of this PEM file are the only ones trusted (not the
    system's nor certifi's); hostnames are checked as usual. Without it the
    default trust of httpx (certifi, or ``SSL_CERT_FILE``) stays.
    ``client_cert``: (certificate, private key), PEM paths, presented when
    the broker asks for one (mutual TLS).

    A file that cannot be read raises its OSError (FileNotFoundError, ...);
    one without what it should hold raises ValueError."""
    if ca_file is None and client_cert is None:
        return None
    if ca_file is not None:
        try:
            ctx = ssl.create_default_context(cafile=os.fspath(ca_file))
        except ssl.SSLError as e:  # before OSError: SSLError is one
            raise ValueError(f"muster: ca_file {os.fspath(ca_file)!r}: no PEM certificate in it ({e})") from e
    else:
        ctx = httpx.create_ssl_context()
    if client_cert is not None:
        if not isinstance(client_cert, tuple) or len(client_cert) != 2:
            raise TypeError(
                f"muster: client_cert {client_cert!r}: want a (certificate, private key) pair of PEM file paths"
            )
        cert, key = (os.fspath(p) for p in client_cert)
        try:
            ctx.load_cert_chain(cert, key)
        except ssl.SSLError as e:
            raise ValueError(
                f"muster: client_cert ({cert!r}, {key!r}): not a PEM certificate and its private key ({e})"
            ) from e
    return ctx
