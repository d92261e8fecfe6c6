"""Whether a server that hung up on a request in plain HTTP speaks TLS.

A server that serves HTTPS reads a plain request as a broken TLS handshake
and hangs up without a word, as a server that failed does. Asked whether it
takes a TLS handshake, it tells the two apart: :mod:`.http_answers` says the
first is a URL to fix at once (``https://``) instead of asking again until
the call's time runs out.
"""

from __future__ import annotations

import socket
import ssl

import httpx

PROBE_SECONDS = 5.0
"""The longest the handshake may take: a server that just hung up on a request answers at once."""


def speaks_tls(url: str, timeout: float) -> bool:
    """Whether the server at ``url`` (its host and port) completes a TLS handshake.

    Its certificate is not checked: the question is only which protocol it
    speaks (a client over the fixed URL checks the certificate as ever).
    """
    where = httpx.URL(url)
    host, port = where.host, where.port or 80
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=min(timeout, PROBE_SECONDS)) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except OSError:  # ssl.SSLError among them: not TLS, or no server now
        return False
