/**
 * `zod` as the Worker's bundle sees it (wrangler.toml `[alias]`): the same module minus its
 * translations (`z.locales` and `z.core.locales`, ~260 KB minified, ~40 KB gzipped).
 * @hono/zod-openapi hands the whole `z` namespace to `extendZodWithOpenApi(z)`, and a namespace
 * used as a value keeps every export behind it in an esbuild bundle, the locales too. Nothing here
 * reads them: English messages are zod's default (set inside zod itself), and the API's validation
 * errors are in its own words. Node and the tests' workerd project import zod itself.
 */
import * as z from "./namespace";

export * from "./namespace";
export { z, z as default };
