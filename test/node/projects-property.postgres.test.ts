import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { projectsPropertySuite } from "../suites/projects-property.suite";

projectsPropertySuite(useHarness(postgresHarness));
