"""The dashboard's web service (Starlette on uvicorn): the page and its assets (served from
the package: no internet needed), ``/api/snapshot`` (history on load), ``/api/events``
(server-sent events, one update a second), ``/api/health`` and ``/metrics`` (Prometheus).

Read-only. On loopback it needs nothing; on any other address a token, as
``Authorization: Bearer <token>`` or ``?token=<token>`` (EventSource cannot set headers);
anything else gets 401.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import os

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .metrics import metrics_text
from .state import DashboardState

STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")
PUSH_PERIOD_S = 1.0


class _Token(BaseHTTPMiddleware):
    def __init__(self, app, token: str | None):
        super().__init__(app)
        self.token = token

    async def dispatch(self, request, call_next):
        if self.token:
            given = request.query_params.get("token") or ""
            auth = request.headers.get("authorization", "")
            if auth.lower().startswith("bearer "):
                given = auth[7:]
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return PlainTextResponse("401: a token is needed (?token= or Authorization: Bearer)", 401)
        return await call_next(request)


def make_app(state: DashboardState, feed=None, token: str | None = None, push_period_s: float = PUSH_PERIOD_S):
    """``feed``: the subscriber (its ``health()``: connected, rejected records); None in tests."""

    def health() -> dict:
        h = {"broker": feed.health() if feed is not None else None}
        return h

    async def page(request):
        return FileResponse(os.path.join(STATIC_DIR, "index.html"))

    async def snapshot(request):
        return JSONResponse({**state.snapshot(), "feed": health()})

    async def health_route(request):
        return JSONResponse({**state.since(state.seq)["health"], "feed": health()})

    async def events(request):
        async def stream():
            seq = int(request.query_params.get("seq", "0") or 0)
            loop = asyncio.get_running_loop()
            tick = loop.time()
            while True:
                if await request.is_disconnected():
                    break
                upd = state.since(seq)
                seq = upd["seq"]
                upd["feed"] = health()
                yield f"event: update\ndata: {json.dumps(upd, separators=(',', ':'))}\n\n"
                # on a fixed grid: a record waits at most one period, however long a push took
                tick += push_period_s
                await asyncio.sleep(max(0.0, tick - loop.time()))
        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    async def metrics(request):
        return Response(metrics_text(state, feed), media_type="text/plain; version=0.0.4; charset=utf-8")

    routes = [Route("/", page), Route("/api/snapshot", snapshot), Route("/api/events", events),
              Route("/api/health", health_route), Route("/metrics", metrics),
              Mount("/static", StaticFiles(directory=STATIC_DIR), name="static")]
    return Starlette(routes=routes, middleware=[Middleware(_Token, token=token)])
