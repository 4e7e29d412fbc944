import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { projectsPropertySuite } from "../suites/projects-property.suite";

projectsPropertySuite(useHarness(pgliteHarness));
