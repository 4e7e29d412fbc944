import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { projectsEnvSuite } from "../suites/projects-env.suite";

projectsEnvSuite(useHarness(pgliteHarness));
