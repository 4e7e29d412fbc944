/** Projects: configuration, environments, env vars, resources, domains, deployments. */
export {};
