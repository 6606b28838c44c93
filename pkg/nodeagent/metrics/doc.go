// Package metrics holds the agent's Prometheus metrics:
//
//	nodeguard_agent_assigned_config_info{source,namespace,name,uid,resource_version}       1
//	nodeguard_agent_active_config_info{source,namespace,name,uid,resource_version}         1
//	nodeguard_agent_last_known_good_config_info{source,namespace,name,uid,resource_version} 1
//	nodeguard_agent_config_error{reason}       1 with the condition's reason while the status carries an error, else 0 with reason=""
//	nodeguard_agent_cordoned                   1 while the Node carries the agent's cordon mark (nodeguard.dev/cordoned), else 0
//	nodeguard_agent_rollbacks_total            configurations rolled back after a failed trial
//	nodeguard_agent_kubelet_restarts_total     restart commands run successfully
//	nodeguard_agent_trial_elapsed_seconds      time the configuration on trial has been on it; 0 without a trial
//	nodeguard_agent_trial_period_seconds       the configured trial period
//	nodeguard_agent_sync_duration_seconds      one pass of the state machine
//	nodeguard_agent_sync_errors_total          passes that ended in an error (retried with backoff)
//
// source is "configmap" or "local"; for "local" the other labels are empty.
// The info metrics carry exactly one series each, so
// `nodeguard_agent_assigned_config_info != on(uid, resource_version) group_left nodeguard_agent_active_config_info`
// style queries find nodes that run something other than what they were given.
package metrics
