import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { projectsPropertySuite } from "../suites/projects-property.suite";

projectsPropertySuite(useHarness(workerHarness));
