// A publisher written with the TypeScript client generated from
// docs/openapi-admin.yaml (openapi-typescript types + openapi-fetch),
// run by .ci/publish-ts/run against a running gatehouse: a publish, its
// repeat with the same Idempotency-Key, a payload against its schema and
// a batch with one invalid event. Exits non-zero on any surprise.
import createClient from "openapi-fetch";
import type { paths } from "./admin.js";

// The little of Node this needs (no @types/node to install).
declare const process: { env: Record<string, string | undefined>; exit(code: number): never };

const base = process.env.GATEHOUSE_ADMIN_URL!;
const apiKey = process.env.PUBLISHER_KEY!;
const appId = Number(process.env.APP_ID);

const client = createClient<paths>({ baseUrl: base, headers: { "X-API-Key": apiKey } });

function check(ok: boolean, what: string, detail: unknown): void {
  if (!ok) {
    console.error(`FAIL ${what}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok   ${what}`);
}

const event = { app_id: appId, event_type: "invoice.issued", biz_data: { invoice_no: "INV-1" } };
const first = await client.POST("/api/events", { params: { header: { "Idempotency-Key": "ts-1" } }, body: event });
check(first.response.status === 201 && first.data?.id.startsWith("msg_") === true, "publish (201, message id)", first.data ?? first.error);

const again = await client.POST("/api/events", { params: { header: { "Idempotency-Key": "ts-1" } }, body: event });
check(again.response.status === 200 && again.data?.id === first.data?.id && again.data?.replayed === true,
  "the same Idempotency-Key answers the first message", again.data ?? again.error);

const bad = await client.POST("/api/events", { body: { ...event, biz_data: { invoice_no: 7 } } });
const badPath = bad.error && "path" in bad.error ? bad.error.path : undefined;
check(bad.response.status === 422 && badPath === "$.invoice_no", "a payload against its schema (422, path)", bad.error);

const batch = await client.POST("/api/events/batch", {
  body: { events: [{ ...event, idempotency_key: "ts-2" }, { ...event, biz_data: {} }] },
});
const results = batch.data?.results ?? [];
check(batch.response.status === 200 && results.length === 2 && results[0].status === 201 && results[1].status === 422 &&
  results[1].error?.path === "$.invoice_no", "a batch delivers the valid event and reports the invalid one", batch.data ?? batch.error);
