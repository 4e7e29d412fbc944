/**
 * Property tests: generated bodies, valid and invalid, drive PATCH /api/projects/:id
 * and PATCH /api/projects/:id/env. Every answer is 200 or 400 (never 5xx), a 400
 * changes nothing, and the stored state always equals a simple in-test model.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { seedTenant, type Member } from "../../support/harness";
import { envTools, MASK, projectHelpers, type Project } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const RUNS = 40;

/** A generated field value and whether the server must accept it; `stored` is what it becomes. */
type Gen = { send: unknown; ok: boolean; stored?: unknown };
const valid = (...values: unknown[]) => fc.constantFrom(...values).map((v): Gen => ({ send: v, ok: true, stored: v }));
const invalid = (...values: unknown[]) => fc.constantFrom(...values).map((v): Gen => ({ send: v, ok: false }));

const FIELDS = {
  name: fc.oneof(
    fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,30}[A-Za-z0-9]$/).map((v): Gen => ({ send: v, ok: true, stored: v })),
    fc.constantFrom("  padded  ").map((v): Gen => ({ send: v, ok: true, stored: v.trim() })),
    invalid("", "   ", null, 42, "x".repeat(101), "tab\there", ["list"]),
  ),
  framework: fc.oneof(valid("auto", "nextjs", "vite", "astro", "sveltekit"), invalid("", null, "next js", 5, "-x")),
  buildCommand: fc.oneof(valid("npm run build", "pnpm build", "make all", null), invalid("", "a\nb", 1, "x".repeat(1025))),
  gitProvider: fc.oneof(valid("github", "gitlab", "bitbucket", "upload", null), invalid("svn", "", 3, "GitHub")),
  gitOwner: fc.oneof(valid("acme", "my-org", "a.b_c", null), invalid("..", "has space", "", "a/b", false)),
  gitRepo: fc.oneof(valid("web", "repo.js", "x-1", null), invalid(".", "a b", "", {})),
  gitBranch: fc.oneof(valid("main", "feature/x", "release-1.2", null), invalid("a..b", "-x", "x.lock", "", "has space", "a//b")),
};
type Field = keyof typeof FIELDS;
const FIELD_NAMES = Object.keys(FIELDS) as Field[];

const projectBody = fc.record({ ...FIELDS, bogus: invalid(1, "x") } as Record<Field | "bogus", fc.Arbitrary<Gen>>, { requiredKeys: [] });

const KEYS = ["A", "B", "C", "D_1", "_E"];
const envKey = fc.oneof(
  { weight: 12, arbitrary: fc.constantFrom(...KEYS).map((k) => ({ key: k, ok: true })) },
  { weight: 1, arbitrary: fc.constantFrom("1A", "bad-key", "", "sp ace").map((k) => ({ key: k, ok: false })) },
);
const upsert = fc.record({
  key: envKey,
  value: fc.oneof({ weight: 5, arbitrary: fc.constantFrom("v1", "v2", "", "x y=z", "multi\nline") }, { weight: 1, arbitrary: fc.constant(MASK) }),
  isSecret: fc.constantFrom(true, true, false, undefined),
});
/** Mostly distinct keys (a valid merge), sometimes a repeated one (400). */
const upserts = fc.oneof(
  { weight: 6, arbitrary: fc.uniqueArray(upsert, { selector: (u) => u.key.key, maxLength: 3 }) },
  { weight: 1, arbitrary: fc.array(upsert, { minLength: 2, maxLength: 3 }) },
);
const envBody = fc.record(
  {
    environment: fc.oneof({ weight: 8, arbitrary: fc.constant("production") }, { weight: 1, arbitrary: fc.constant("nope") }),
    upserts,
    deletes: fc.array(envKey, { maxLength: 2 }),
  },
  { requiredKeys: [] },
);
/** What a client does: read the list and send it back, maybe flipping one variable's isSecret. */
const echoStep = fc.record({ echo: fc.constant(true as const), flip: fc.option(fc.constantFrom(...KEYS), { nil: undefined, freq: 3 }) });
const envStep = fc.oneof({ weight: 2, arbitrary: envBody }, { weight: 1, arbitrary: echoStep });

type Model = Record<Field, unknown>;
type EnvModel = Map<string, { value: string; isSecret: boolean }>;

const h = useRuntimeHarness();
const { create, call, get } = projectHelpers(h);
const { readEnv, storedSecret } = envTools(h);

const statusOk = (status: number, expected: number, text: string) => {
  expect(status, text).toBeLessThan(500);
  expect(status, text).toBe(expected);
};

describe("projects: property tests", () => {
  it("PATCH /api/projects/:id matches the model for generated bodies", { timeout: 120_000 }, async () => {
    const t = await seedTenant(h);
    await fc.assert(
      fc.asyncProperty(fc.array(projectBody, { minLength: 1, maxLength: 4 }), async (bodies) => {
        const p = await create(t, { name: "prop" });
        const model: Model = { name: "prop", framework: "auto", buildCommand: null, gitProvider: null, gitOwner: null, gitRepo: null, gitBranch: null };
        for (const gen of bodies) {
          const body = Object.fromEntries(Object.entries(gen).map(([k, g]) => [k, g.send]));
          const ok = Object.values(gen).every((g) => g.ok);
          const res = await call(t, `/${p.id}`, { method: "PATCH", json: body });
          const text = await res.text();
          statusOk(res.status, ok ? 200 : 400, `${JSON.stringify(body)} -> ${text}`);
          if (ok) for (const [k, g] of Object.entries(gen)) model[k as Field] = g.stored;
          const stored = await get(t, p.id);
          expect(Object.fromEntries(FIELD_NAMES.map((f) => [f, stored[f]]))).toEqual(model);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("PATCH /api/projects/:id/env matches the model for generated bodies", { timeout: 120_000 }, async () => {
    const t: Member = await seedTenant(h);
    await fc.assert(
      fc.asyncProperty(fc.array(envStep, { minLength: 2, maxLength: 6 }), async (steps) => {
        const p: Project = await create(t, { name: "env-prop" });
        const model: EnvModel = new Map();
        for (const step of steps) {
          let gen: {
            environment?: string;
            upserts?: Array<{ key: { key: string; ok: boolean }; value: string; isSecret?: boolean }>;
            deletes?: Array<{ key: string; ok: boolean }>;
          };
          if ("echo" in step) {
            const listed = await readEnv(t, p);
            gen = { upserts: listed.map((v) => ({ key: { key: v.key, ok: true }, value: v.value, isSecret: v.key === step.flip ? !v.isSecret : v.isSecret })) };
          } else gen = step;
          const upserts = (gen.upserts ?? []).map((u) => ({ key: u.key.key, value: u.value, ...(u.isSecret === undefined ? {} : { isSecret: u.isSecret }) }));
          const deletes = (gen.deletes ?? []).map((d) => d.key);
          const body = {
            ...(gen.environment ? { environment: gen.environment } : {}),
            ...(gen.upserts ? { upserts } : {}),
            ...(gen.deletes ? { deletes } : {}),
          };

          // The model: what the server must accept, and the state after it.
          let ok = gen.environment !== "nope" && [...(gen.upserts ?? []).map((u) => u.key), ...(gen.deletes ?? [])].every((k) => k.ok);
          const upsertKeys = upserts.map((u) => u.key);
          if (new Set(upsertKeys).size !== upsertKeys.length || deletes.some((d) => upsertKeys.includes(d))) ok = false;
          const next: EnvModel = new Map(model);
          for (const u of upserts) {
            const prev = model.get(u.key);
            const isSecret = u.isSecret ?? prev?.isSecret ?? false;
            if (u.value === MASK) {
              if (prev?.isSecret && isSecret) continue;
              ok = false;
            }
            next.set(u.key, { value: u.value, isSecret });
          }
          for (const d of deletes) next.delete(d);

          const res = await call(t, `/${p.id}/env`, { method: "PATCH", json: body });
          const text = await res.text();
          statusOk(res.status, ok ? 200 : 400, `${JSON.stringify(body)} -> ${text}`);
          if (ok) {
            model.clear();
            for (const [k, v] of next) model.set(k, v);
          }

          const vars = await readEnv(t, p);
          // Compared as sets: the database's collation orders keys, not JavaScript's.
          expect(vars.map((v) => v.key).sort()).toEqual([...model.keys()].sort());
          for (const v of vars) {
            const m = model.get(v.key)!;
            expect(v.isSecret, v.key).toBe(m.isSecret);
            expect(v.value, v.key).toBe(m.isSecret ? MASK : m.value);
            if (m.isSecret) expect((await storedSecret(p, t.orgId, v.key)).plain, v.key).toBe(m.value);
          }
        }
      }),
      { numRuns: RUNS },
    );
  });
});
