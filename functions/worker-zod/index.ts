/**
 * `zod` as the Worker's bundle sees it (wrangler.toml `[alias]`): the same module less what the
 * Worker never uses: the translations (`z.locales`, `z.core.locales`), the schema compiler
 * (`z.compile` and its companions) and `z.fromJSONSchema`; ~300 KB minified, ~50 KB gzipped.
 * @hono/zod-openapi hands the whole `z` namespace to `extendZodWithOpenApi(z)`, and a namespace
 * used as a value keeps every export behind it in an esbuild bundle. zod's own modules import
 * one another directly, never through this namespace, so they are unaffected: English messages
 * are zod's default (set inside zod itself), and the API's validation errors are in its own
 * words. A left-out function throws, naming itself. Node and the tests' workerd project import
 * zod itself; test/node/worker-bundle-size.test.ts runs this bundle.
 */
import * as z from "./namespace";

export * from "./namespace";
export { z, z as default };
