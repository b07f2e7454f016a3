#!/usr/bin/python3
"""openapi_check.py SPEC ROUTES_C [RESPONSES.jsonl]

Checks api/openapi.yaml three ways, with Debian's python3-jsonschema
(JSON Schema 2020-12, the dialect of OpenAPI 3.1):
  1. every schema in the document is a valid 2020-12 schema;
  2. the broker's route table (src/broker/routes.c) and the document's
     paths and methods are the same set;
  3. each recorded response (one JSON object per line: method, template,
     status, content_type, body) matches the document: the status is
     listed for that operation, the content type is declared, and the
     body validates against the schema.
Prints a line per problem and exits 1 if there was any.
"""
import json
import re
import sys

import jsonschema
import yaml

problems = []


def walk_schemas(node, path):
    if isinstance(node, dict):
        if "schema" in node and isinstance(node["schema"], dict):
            yield path + "/schema", node["schema"]
        for k, v in node.items():
            yield from walk_schemas(v, path + "/" + str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk_schemas(v, path + "/" + str(i))


def main():
    spec = yaml.safe_load(open(sys.argv[1]))
    if not str(spec.get("openapi", "")).startswith("3.1"):
        problems.append("openapi: expected 3.1.x")
    validator_cls = jsonschema.Draft202012Validator
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        try:
            validator_cls.check_schema(schema)
        except jsonschema.SchemaError as e:
            problems.append(f"components/schemas/{name}: {e.message}")
    for where, schema in walk_schemas(spec.get("paths", {}), "paths"):
        try:
            validator_cls.check_schema(schema)
        except jsonschema.SchemaError as e:
            problems.append(f"{where}: {e.message}")

    # 2. routes
    routes = set(re.findall(r'\{\s*"([A-Z]+)",\s*"(/[^"]*)"', open(sys.argv[2]).read()))
    documented = set()
    for path, item in spec["paths"].items():
        for method in item:
            if method in ("get", "put", "post", "delete", "patch"):
                documented.add((method.upper(), path))
    for m, p in sorted(routes - documented):
        problems.append(f"route {m} {p} is not in the OpenAPI document")
    for m, p in sorted(documented - routes):
        problems.append(f"documented {m} {p} is not a route of the broker")

    # 3. responses
    if len(sys.argv) > 3:
        resolver = jsonschema.RefResolver.from_schema(spec)
        seen = 0
        for line in open(sys.argv[3]):
            r = json.loads(line)
            seen += 1
            op = spec["paths"].get(r["template"], {}).get(r["method"].lower())
            what = f'{r["method"]} {r["template"]} -> {r["status"]}'
            if op is None:
                problems.append(f"{what}: no such operation in the document")
                continue
            resp = op["responses"].get(str(r["status"]))
            if resp is None:
                problems.append(f"{what}: status not documented")
                continue
            if "$ref" in resp:
                resp = resolver.resolve(resp["$ref"])[1]
            ctype = r["content_type"].split(";")[0].strip()
            media = resp.get("content", {}).get(ctype)
            if media is None:
                problems.append(f"{what}: content type {ctype} not documented")
                continue
            if ctype.endswith("json"):
                try:
                    body = json.loads(r["body"])
                except ValueError:
                    problems.append(f"{what}: body is not JSON")
                    continue
                v = validator_cls(media["schema"], resolver=resolver)
                for err in v.iter_errors(body):
                    problems.append(f"{what}: {'/'.join(map(str, err.absolute_path))}: {err.message}")
        if seen == 0:
            problems.append("no responses were recorded")
        print(f"# {seen} responses checked")
    for p in problems:
        print(p)
    return 1 if problems else 0


sys.exit(main())
