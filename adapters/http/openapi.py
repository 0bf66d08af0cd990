"""`/openapi.json`, generated from the route table and the pydantic wire models, so the document
cannot leave out a route or describe a body the server does not accept."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from adapters.http import ids
from adapters.http import models as m

_PARAM = re.compile(r"{(\w+)}")

_STATUS_TEXT = {
    200: "OK",
    201: "Created",
    400: "The body does not decode, or a JSON object has a key twice (`invalid_json`)",
    401: "No, unknown or revoked bearer token (`unauthorized`)",
    403: "The credential may not do this (`member_credential_required`, …)",
    404: "No such workspace, run, task or executor for this credential (`not_found`); also "
    "for an identifier its `pattern` refuses",
    409: "Conflicts with the current state (`already_decided`, `not_claimable_kind`, …)",
    413: "The body is larger than the configured bound (`payload_too_large`)",
    415: "A Content-Encoding other than gzip or deflate (`unsupported_encoding`)",
    422: "The body or a parameter is malformed; `detail` names the field",
}

_PATH_DOC = {
    "ws": "Workspace id (lowercase letters, digits, - and _; at most 63)",
    "run": "Run id (`run_…`: letters, digits, _ and -; at most 40)",
    "key": "Task key, unique within the run (letters, digits and . _ : ~ -; at most 200)",
    "executor": "Executor id (`exe_…`: letters, digits, _ and -; at most 40)",
}


@dataclass(frozen=True)
class Query:
    name: str
    schema: dict[str, Any]
    description: str


@dataclass(frozen=True)
class Route:
    """One route: how it is served and how it is documented."""

    method: str
    path: str
    handler: Callable[..., Awaitable[web.StreamResponse]]
    summary: str
    who: str  # "app", "member", "app, member", "member / resolution token", "public"
    body: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    errors: tuple[int, ...] = (401, 404, 422)
    query: tuple[Query, ...] = ()
    stream: str = ""  # content type when the answer is not JSON
    description: str = ""
    also: tuple[int, ...] = field(default=())  # another success status (e.g. 200 on replay)

    @property
    def public(self) -> bool:
        return self.who == "public"


def _schemas(routes: Sequence[Route]) -> dict[str, Any]:
    models: dict[type[BaseModel], None] = {m.ErrorOut: None}
    for route in routes:
        for model in (route.body, route.response):
            if model is not None:
                models[model] = None
    mode: Literal["validation"] = "validation"
    pairs = [(model, mode) for model in models]
    _, top = models_json_schema(pairs, ref_template="#/components/schemas/{model}")
    schemas: dict[str, Any] = _json_value_refs(top.get("$defs", {}))
    schemas[m.JSON_VALUE] = m.JSON_VALUE_SCHEMA  # what the models' JsonValue fields refer to
    return schemas


def _json_value_refs(node: Any) -> Any:
    """Replace each JsonValue marker (models.JSON_VALUE_MARK) with a `$ref` to its schema."""
    if isinstance(node, list):
        return [_json_value_refs(item) for item in node]
    if not isinstance(node, dict):
        return node
    done = {key: _json_value_refs(value) for key, value in node.items()}
    if done.pop(m.JSON_VALUE_MARK, False):
        done["$ref"] = f"#/components/schemas/{m.JSON_VALUE}"
    return done


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _operation(route: Route) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": {"type": "string", "pattern": ids.PATTERNS[name]},
            "description": _PATH_DOC.get(name, name),
        }
        for name in _PARAM.findall(route.path)
    ]
    params += [
        {"name": q.name, "in": "query", "required": False, "schema": q.schema,
         "description": q.description}
        for q in route.query
    ]  # fmt: skip
    responses: dict[str, Any] = {}
    for status in (route.status, *route.also):
        answer: dict[str, Any] = {"description": _STATUS_TEXT.get(status, "OK")}
        if route.stream:
            answer["content"] = {route.stream: {"schema": {"type": "string"}}}
        elif route.response is not None or status >= 400:
            model = route.response if status < 400 and route.response else m.ErrorOut
            answer["content"] = {"application/json": {"schema": _ref(model)}}
        responses[str(status)] = answer
    refusals = route.errors
    if route.body is not None:  # every body may fail to decode, be too large or encoded oddly
        refusals = tuple(sorted({*route.errors, 400, 413, 415}))
    for status in refusals:
        responses[str(status)] = {
            "description": _STATUS_TEXT.get(status, "Error"),
            "content": {"application/json": {"schema": _ref(m.ErrorOut)}},
        }
    operation: dict[str, Any] = {
        "operationId": route.method.lower() + "_" + re.sub(r"\W+", "_", route.path).strip("_"),
        "summary": route.summary,
        "description": (route.description + "\n\n" if route.description else "")
        + f"Who: {route.who}.",
        "parameters": params,
        "responses": responses,
    }
    if route.public:
        operation["security"] = []
    elif "token" in route.who:
        operation["security"] = [{"bearer": []}, {}]
    if route.body is not None:
        operation["requestBody"] = {
            "required": any(f.is_required() for f in route.body.model_fields.values()),
            "content": {"application/json": {"schema": _ref(route.body)}},
        }
    return operation


def document(routes: Sequence[Route]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "approvalbot",
            "version": "1",
            "description": (
                "The approval stage for AI agents. Errors are always "
                '`{"error": {"code", "detail"}}`. Bearer tokens: application tokens (agent '
                "runtimes) and member tokens (people); only members decide."
            ),
        },
        "components": {
            "schemas": _schemas(routes),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
