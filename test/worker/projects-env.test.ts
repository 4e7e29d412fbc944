import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { projectsEnvSuite } from "../suites/projects-env.suite";

projectsEnvSuite(useHarness(workerHarness));
