// Events (contract section 9): the header lists the signed-in user's run and build events; the run page ticks on its run's events (lib/liveRun).
// Typed by codegen (codegen.ts reads every *.graphql.ts) from the committed schema.graphql.
import { graphql } from "../gql";

export const EventsSubscription = graphql(`
  subscription Events($types: [String!], $after: String) {
    events(types: $types, after: $after) { id type subject time data }
  }
`);

export const RecentEventsQuery = graphql(`
  query RecentEvents($types: [String!], $limit: Int!) {
    recentEvents(types: $types, limit: $limit) {
      items { id type subject time data }
      nextCursor
    }
  }
`);
