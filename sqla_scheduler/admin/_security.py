"""The admin page's defences, as plain ASGI middleware and two token functions.

* ``SecurityHeaders`` puts a strict Content-Security-Policy (no script but the app's
  own ``admin.js``, nothing inline) and
  the other hardening headers on every response, errors included.
* ``BasicAuth`` lets a request through only with the configured user and password,
  compared in constant time.
* ``AllowedMethods`` answers 405 to every method but GET and HEAD (and POST when
  actions are on).
* ``csrf_token`` / ``csrf_valid`` derive and check the token every action form
  carries: an HMAC of the user name under a secret the browser never sees.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Iterable

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "SECURITY_HEADERS",
    "USER_KEY",
    "AllowedMethods",
    "BasicAuth",
    "SecurityHeaders",
    "csrf_token",
    "csrf_valid",
]

#: The page loads its stylesheet and its one script (the time zone toggle) from itself and
#: nothing else: no inline script or style, nothing from another origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}

#: Where ``BasicAuth`` leaves the signed-in user name in the ASGI scope.
USER_KEY = "sqla_scheduler.admin.user"


class SecurityHeaders:
    """Set ``SECURITY_HEADERS`` on every HTTP response of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


class BasicAuth:
    """HTTP Basic authentication against one user name and password.

    Both are compared with ``secrets.compare_digest``, always both, so the time taken
    says nothing about which was wrong or how much of either matched.
    """

    def __init__(self, app: ASGIApp, *, username: str, password: str, realm: str) -> None:
        self.app = app
        self._username = username.encode()
        self._password = password.encode()
        self._challenge = f'Basic realm="{realm}", charset="UTF-8"'

    def _user(self, authorization: str | None) -> str | None:
        """The user name when ``authorization`` carries the right credentials."""
        if authorization is None:
            return None
        scheme, _, encoded = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        username, colon, password = decoded.partition(b":")
        if not colon:
            return None
        user_ok = secrets.compare_digest(username, self._username)
        password_ok = secrets.compare_digest(password, self._password)
        if not (user_ok & password_ok):
            return None
        return self._username.decode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        user = self._user(Headers(scope=scope).get("authorization"))
        if user is None:
            response = PlainTextResponse(
                "Authentication required.\n",
                status_code=401,
                headers={"WWW-Authenticate": self._challenge},
            )
            await response(scope, receive, send)
            return
        scope[USER_KEY] = user
        await self.app(scope, receive, send)


class AllowedMethods:
    """Answer 405 Method Not Allowed to any method not in ``methods``."""

    def __init__(self, app: ASGIApp, *, methods: Iterable[str]) -> None:
        self.app = app
        self.methods = frozenset(m.upper() for m in methods)
        self._allow = ", ".join(sorted(self.methods))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"].upper() not in self.methods:
            response = PlainTextResponse(
                "Method not allowed: this admin page is read-only.\n"
                if "POST" not in self.methods
                else "Method not allowed.\n",
                status_code=405,
                headers={"Allow": self._allow},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def csrf_token(secret: bytes, username: str) -> str:
    """The token the action forms of ``username`` carry."""
    message = b"sqla-scheduler admin action\x00" + username.encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def csrf_valid(secret: bytes, username: str, token: str | None) -> bool:
    """Whether ``token`` is ``csrf_token`` of ``username``, compared in constant time."""
    if not token:
        return False
    return secrets.compare_digest(token.encode(), csrf_token(secret, username).encode())
