/**
 * The app's router: Hono's TrieRouter with its answers kept per method and path.
 *
 * Hono's faster RegExpRouter refuses this API's routes (a static segment beside a
 * parameter at the same level, e.g. `/projects/home` and `/projects/:id`), so
 * SmartRouter fell back to the trie, which walks ~670 routes' nodes on every
 * request: 0.5 µs for `/api/settings`, 2.3 µs for `/api/projects/:id/env`. A
 * request to a path seen before takes one Map lookup instead. Hono only reads a
 * match result (handlers and parameters), so one result serves every request on
 * its path. Bounded: at most MAX_ENTRIES paths of at most MAX_PATH characters
 * (clients choose paths); when full it starts over, so a flood of distinct paths
 * costs each request the trie walk it would have paid anyway.
 */
import type { Result, Router } from "hono/router";
import { TrieRouter } from "hono/router/trie-router";

const MAX_ENTRIES = 2000;
const MAX_PATH = 256;

export class CachedTrieRouter<T> implements Router<T> {
  readonly name = "CachedTrieRouter";
  readonly #trie = new TrieRouter<T>();
  /** Per method, per path: two lookups rather than one of a `method path` string built per request. */
  readonly #answers = new Map<string, Map<string, Result<T>>>();
  #size = 0;

  /** How many paths' answers are kept (for the tests). */
  get cachedPaths(): number {
    return this.#size;
  }

  add(method: string, path: string, handler: T): void {
    this.#trie.add(method, path, handler);
    this.#clear();
  }

  match(method: string, path: string): Result<T> {
    if (path.length > MAX_PATH) return this.#trie.match(method, path);
    let byPath = this.#answers.get(method);
    let answer = byPath?.get(path);
    if (answer === undefined) {
      answer = this.#trie.match(method, path);
      if (this.#size >= MAX_ENTRIES) this.#clear();
      byPath = this.#answers.get(method);
      if (!byPath) {
        byPath = new Map();
        this.#answers.set(method, byPath);
      }
      byPath.set(path, answer);
      this.#size++;
    }
    return answer;
  }

  #clear(): void {
    this.#answers.clear();
    this.#size = 0;
  }
}
