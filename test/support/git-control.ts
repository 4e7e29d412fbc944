/**
 * The control API of the test git server (test/support/git-server.ts) over
 * HTTP, for tests in workerd, which cannot run git: fresh repositories, new
 * commits, refs read back. Kept apart from the server so importing it pulls in
 * no Node built-ins.
 */
export interface TestRepo {
  owner: string;
  repo: string;
  private: boolean;
  /** `<server>/<owner>/<repo>.git` (no credentials). */
  url: string;
  /** Branch name → head commit when the repository was created. */
  branches: Record<string, string>;
}

export function gitServerControl(url: string, fetchImpl: typeof fetch = fetch) {
  const call = async <T>(path: string, body?: unknown): Promise<T> => {
    const res = await fetchImpl(`${url}/__control/${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json()) as T & { error?: string };
    if (!res.ok) throw new Error(`git test server: ${json.error ?? res.status}`);
    return json;
  };
  return {
    createRepo: (options: { owner?: string; repo?: string; private?: boolean } = {}) => call<TestRepo>("repos", options),
    addCommit: async (owner: string, repo: string, branch: string, message?: string) =>
      (await call<{ sha: string }>("commits", { owner, repo, branch, message })).sha,
    revParse: async (owner: string, repo: string, ref: string) => (await call<{ sha: string }>(`rev-parse?${new URLSearchParams({ owner, repo, ref })}`)).sha,
  };
}
