import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { projectsSuite } from "../suites/projects.suite";

projectsSuite(useHarness(workerHarness));
