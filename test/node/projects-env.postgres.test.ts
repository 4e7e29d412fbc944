import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { projectsEnvSuite } from "../suites/projects-env.suite";

projectsEnvSuite(useHarness(postgresHarness));
