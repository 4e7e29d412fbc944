/** Stands in for a zod export the Worker's bundle leaves out (see ./index.ts): calling it says so. */
export function absent(name: string): () => never {
  return () => {
    throw new Error(`zod's ${name} is not in the Worker's bundle (functions/worker-zod/index.ts)`);
  };
}
