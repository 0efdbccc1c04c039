"""`GET /metrics`: the service's metrics in the Prometheus text format (OpenMetrics when the scraper asks for it), for
operators. Not in the OpenAPI document and no tenant key: open, or behind `CAIRN_METRICS_TOKEN` when one is set."""

import secrets

from fastapi import APIRouter, Request, Response
from prometheus_client.exposition import choose_encoder

from cairn.edge.auth import bearer_key
from cairn.edge.problems import problem_response
from cairn.platform.consumer_metrics import ConsumerMetrics
from cairn.platform.metrics import ServiceMetrics
from cairn.platform.settings import MetricsSettings


def metrics_router(metrics: ServiceMetrics, settings: MetricsSettings) -> APIRouter:
    router = APIRouter()
    token = settings.token.get_secret_value().encode() if settings.token else b""

    @router.get("/metrics", include_in_schema=False)
    async def scrape(request: Request) -> Response:
        if token and not secrets.compare_digest((bearer_key(request.headers) or "").encode(), token):
            detail = "Send the metrics token (CAIRN_METRICS_TOKEN) as 'Authorization: Bearer <token>'."
            return problem_response(401, detail, headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
        consumers: ConsumerMetrics | None = getattr(request.app.state, "consumer_metrics", None)
        if consumers is not None:
            await consumers.refresh()
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(metrics.registry), media_type=content_type)

    return router
